// Tokenizer: text <-> token ids, behind one interface for every format.
//
// LoadTokenizer() picks the implementation from the path it is given.
// speclab's own tokenizer is data/tokenizer/speclab.model, built by
// scripts/build_corpus.sh (see docs/data.md).
#ifndef SPECLAB_FRAMEWORK_TOKENIZERS_TOKENIZER_H_
#define SPECLAB_FRAMEWORK_TOKENIZERS_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace speclab {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The ids of `text`, without BOS or EOS: callers add those themselves.
  // Decode(Encode(text)) == text for any valid UTF-8 text.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(
      std::string_view text) const = 0;
  // The text of `ids`; control ids (BOS, EOS, padding) decode to nothing.
  // An id outside [0, vocab_size()) is an InvalidArgument error.
  virtual absl::StatusOr<std::string> Decode(
      absl::Span<const int32_t> ids) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if the tokenizer has none
  virtual int32_t eos_id() const = 0;  // -1 if the tokenizer has none
};

// Loads the tokenizer at `path`: a file, or a folder holding one under its
// conventional name (the format table is in tokenizer.cc):
//   *.model, or <folder>/tokenizer.model   SentencePiece (SentencePieceTokenizer)
//   *.json,  or <folder>/tokenizer.json    Hugging Face (BpeTokenizer)
// In a folder holding both, the SentencePiece model wins.
// Errors are NotFound (nothing at `path`, or no known file in the folder),
// Unimplemented (a known but unsupported format) or the loader's own error;
// every message names the file.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_TOKENIZERS_TOKENIZER_H_
