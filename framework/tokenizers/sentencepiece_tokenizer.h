// SentencePieceTokenizer: a Tokenizer over a SentencePiece `.model` file.
//
// speclab reads the model itself (framework/core/proto/
// sentencepiece_model.proto) and encodes and decodes exactly as
// libsentencepiece 0.1.97 does (SentencePieceProcessor::Encode and Decode,
// no sampling, no extra options); it does not link libsentencepiece, whose
// Debian build exports its own protobuf 3.14 symbols that clash with
// libprotobuf's in any process that loads both.
//
// Supported: BPE, unigram (the optimized Viterbi encoder, 0.1.97's default),
// word and char models; byte fallback; user-defined, control, unused and
// byte pieces; the normalizer's precompiled charsmap (identity, nmt_nfkc,
// nfkc, nfkc_cf, ... as spm_train builds them), add_dummy_prefix,
// remove_extra_whitespaces, escape_whitespaces, treat_whitespace_as_suffix;
// the model's self-test samples (checked at load, as upstream does).
// Refused at load, with an error naming the file: a file that is no
// ModelProto with pieces and a trainer_spec, a model upstream would reject
// (no or two <unk>, duplicate pieces, byte pieces without byte_fallback, ...),
// a broken charsmap, and a denormalizer (spm_train
// --denormalization_rule_tsv). Not offered: sampling, n-best, extra options.
//
// Encoding costs O(n log n) on the text's lines (more exactly: on the runs
// between characters that no merge can involve, "\n" in speclab.model), a
// few MB/s on one core. A unigram model keeps 12 bytes a byte of text.
#ifndef SPECLAB_FRAMEWORK_TOKENIZERS_SENTENCEPIECE_TOKENIZER_H_
#define SPECLAB_FRAMEWORK_TOKENIZERS_SENTENCEPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {

// Thread-safe: the model is immutable after Load and every method is const.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads the model file at `path`; errors name the file.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Load(
      const std::string& path);

  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;
  ~SentencePieceTokenizer() override;

  absl::StatusOr<std::vector<int32_t>> Encode(
      std::string_view text) const override;
  absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const override;

  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }  // -1 if the model has none

  // The piece of `id` as stored in the model ("▁the", "<0x0A>", "</s>").
  absl::StatusOr<std::string> IdToPiece(int32_t id) const;

  const std::string& path() const { return path_; }

  // The model's internals (sentencepiece_tokenizer.cc).
  struct Model;

 private:
  SentencePieceTokenizer(std::string path, std::unique_ptr<const Model> model);

  absl::Status CheckId(int32_t id) const;

  std::string path_;
  std::unique_ptr<const Model> model_;
  int32_t vocab_size_ = 0;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t unk_id_ = -1;
  int32_t pad_id_ = -1;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_TOKENIZERS_SENTENCEPIECE_TOKENIZER_H_
