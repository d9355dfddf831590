// Corpus ids as a tensor and random windows of them: the batches of the
// draft-head trainers (train_acceptance_head.h, train_draft_head.h).
#ifndef SPECLAB_EXPERIMENTS_CORPUS_WINDOWS_H_
#define SPECLAB_EXPERIMENTS_CORPUS_WINDOWS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {

// The ids of a corpus text file (experiments/corpus_text.h) as a CPU int64
// tensor; an error names the file when it holds less than one window.
absl::StatusOr<at::Tensor> CorpusTokens(const Tokenizer& tokenizer, const std::string& path, int64_t seq_len);

// `windows` windows [windows, seq_len] of `tokens`, their starts drawn on the
// host from `rng` (so that a batch is a function of the seed), gathered on
// the tokens' device.
at::Tensor RandomWindows(const at::Tensor& tokens, int64_t windows, int64_t seq_len, std::mt19937_64& rng);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_CORPUS_WINDOWS_H_
