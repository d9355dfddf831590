// The ids of a corpus text file, the way speclab's corpus is laid out
// (scripts/build_corpus.sh): documents, each ended by a line "<|endoftext|>",
// each becoming BOS, the ids of its text (newlines included), EOS. Text after
// the last separator is one more document. Used by `speclab train` and
// `speclab datastore`.
#ifndef SPECLAB_EXPERIMENTS_CORPUS_TEXT_H_
#define SPECLAB_EXPERIMENTS_CORPUS_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {

struct CorpusIds {
  std::vector<int32_t> ids;
  int64_t documents = 0;
};

// The ids of the text file at `text` (a path). Errors name the file, and the
// line for text the tokenizer refuses.
absl::StatusOr<CorpusIds> TokenizeCorpusText(const Tokenizer& tokenizer, const std::string& text);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_CORPUS_TEXT_H_
