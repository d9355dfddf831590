// BpeTokenizer: a HuggingFace `tokenizer.json` with a byte-level BPE model,
// the format of the GPT-2, Llama-3 and Qwen2/Qwen3 families.
//
// Supported (anything else is refused with an Unimplemented error that names
// the JSON key):
//   model          type BPE: vocab, merges ("a b" strings or ["a", "b"] pairs),
//                  ignore_merges, unk_token, fuse_unk, byte_fallback
//   normalizer     null, NFC, NFD, or a Sequence of them
//   pre_tokenizer  ByteLevel(add_prefix_space, use_regex), alone or last in a
//                  Sequence after Split steps. Split takes a String pattern or
//                  one of the known Regex patterns (GPT-2, Llama-3 / GPT-4
//                  cl100k, Qwen2), matched by hand-written matchers; behavior
//                  Removed, Isolated, MergedWithPrevious, MergedWithNext,
//                  Contiguous; invert
//   added_tokens   matched in the text before normalization (normalized:
//                  false) or after it (normalized: true), leftmost-longest,
//                  with lstrip, rstrip and single_word
//   decoder        ByteLevel (or null)
// Encode() returns the raw ids: the post_processor (TemplateProcessing, ...)
// is not applied, and truncation and padding are ignored. It equals
// `tokenizers`' tok.encode(text, add_special_tokens=False).ids (checked
// against tokenizers 0.23.2 on the Llama-3 and Qwen3 files; see
// tests/fixtures/tokenizers/). Character classes and NFC follow Unicode 15.0.
#ifndef SPECLAB_FRAMEWORK_TOKENIZERS_BPE_TOKENIZER_H_
#define SPECLAB_FRAMEWORK_TOKENIZERS_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {

// Thread-safe: every method is const (the per-word cache has its own lock).
class BpeTokenizer final : public Tokenizer {
 public:
  // Loads `path`: a tokenizer.json file or a folder holding one. A
  // tokenizer_config.json beside it, when present, names the BOS and EOS
  // tokens (its bos_token / eos_token keys, as in `transformers`); otherwise
  // they come from the post_processor's template, then from well-known token
  // names (<|begin_of_text|>, <s>, <|end_of_text|>, </s>, <|endoftext|>, ...).
  // Errors name the file and the JSON key.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> Load(const std::string& path);
  // From JSON text; `source` names it in errors. `config_json` is the text of
  // a tokenizer_config.json, or empty.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromJson(std::string_view json,
                                                                const std::string& source,
                                                                std::string_view config_json = {});

  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;
  ~BpeTokenizer() override;

  // Invalid UTF-8 is an InvalidArgument error.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const override;
  // Special added tokens (those marked "special", e.g. <|begin_of_text|>,
  // <|im_end|>) decode to nothing, as the Tokenizer interface asks and as
  // `tokenizers`' decode(ids, skip_special_tokens=True) does. Byte sequences
  // that are not valid UTF-8 (a split character) become U+FFFD.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  // Like Decode() but keeps special tokens' text, so that for any valid UTF-8
  // text DecodeWithSpecialTokens(Encode(text)) == Normalize(text), unless the
  // ByteLevel pre-tokenizer adds a prefix space (GPT-2 style): that space stays.
  absl::StatusOr<std::string> DecodeWithSpecialTokens(absl::Span<const int32_t> ids) const;

  // One more than the largest id of the vocab and the added tokens.
  int32_t vocab_size() const override;
  int32_t bos_id() const override;
  int32_t eos_id() const override;

  // The id of a vocab entry or added token (byte-level spelling, "Ġthe"), or -1.
  int32_t TokenToId(std::string_view token) const;
  // The token of `id` as spelled in the file; InvalidArgument if none.
  absl::StatusOr<std::string> IdToToken(int32_t id) const;
  // Whether `id` is an added token marked "special".
  bool IsSpecial(int32_t id) const;
  // `text` after the normalizer (unchanged if there is none); InvalidArgument
  // for invalid UTF-8.
  absl::StatusOr<std::string> Normalize(std::string_view text) const;

  const std::string& path() const;

  struct State;  // the loaded model (defined in bpe_tokenizer.cc)

 private:
  explicit BpeTokenizer(std::unique_ptr<State> state);
  absl::StatusOr<std::string> DecodeImpl(absl::Span<const int32_t> ids, bool skip_special) const;

  std::unique_ptr<State> state_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_TOKENIZERS_BPE_TOKENIZER_H_
