#include "experiments/corpus_text.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

constexpr char kDocumentSeparator[] = "<|endoftext|>";

}  // namespace

absl::StatusOr<CorpusIds> TokenizeCorpusText(const Tokenizer& tokenizer, const std::string& text) {
  std::ifstream in(text);
  if (!in) return absl::NotFoundError(absl::StrCat(text, ": cannot open the text file"));
  CorpusIds out;
  std::vector<int32_t>& ids = out.ids;
  const int64_t vocab = tokenizer.vocab_size();
  const int64_t bos = tokenizer.bos_id();
  const int64_t eos = tokenizer.eos_id();
  std::string document;
  std::string line;
  int64_t line_number = 0;
  bool in_document = false;
  // Encodes the pending text. A document is cut only after a newline, which
  // the tokenizer encodes as a piece of its own, so chunking is exact.
  auto flush = [&]() -> absl::Status {
    if (document.empty()) return absl::OkStatus();
    auto encoded = tokenizer.Encode(document);
    if (!encoded.ok())
      return absl::Status(encoded.status().code(),
                          absl::StrCat(text, ":", line_number, ": ", encoded.status().message()));
    for (int32_t id : *encoded) {
      if (id < 0 || id >= vocab)
        return absl::InternalError(absl::StrCat(text, ":", line_number, ": the tokenizer produced id ", id,
                                                " outside [0, ", vocab, ")"));
      ids.push_back(id);
    }
    document.clear();
    return absl::OkStatus();
  };
  auto end_document = [&]() -> absl::Status {
    RETURN_IF_ERROR(flush());
    if (eos >= 0) ids.push_back(static_cast<int32_t>(eos));
    ++out.documents;
    in_document = false;
    return absl::OkStatus();
  };
  while (std::getline(in, line)) {
    ++line_number;
    if (line == kDocumentSeparator) {
      if (in_document) RETURN_IF_ERROR(end_document());
      continue;
    }
    if (!in_document) {
      if (bos >= 0) ids.push_back(static_cast<int32_t>(bos));
      in_document = true;
    }
    document += line;
    document += '\n';
    if (document.size() >= (1 << 20)) RETURN_IF_ERROR(flush());
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(text, ":", line_number, ": read failed"));
  if (in_document) RETURN_IF_ERROR(end_document());
  return out;
}

}  // namespace speclab
