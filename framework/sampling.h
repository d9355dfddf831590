// Sampling: the one logits-processor chain applied to target and drafter alike.
//
// p = softmax(top_p(top_k(logits / temperature))); temperature 0 means the
// one-hot argmax distribution (docs/algorithms.md §1.3). Verification always
// compares these processed distributions.
#ifndef SPECLAB_FRAMEWORK_SAMPLING_H_
#define SPECLAB_FRAMEWORK_SAMPLING_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "absl/status/status.h"

namespace speclab {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;        // 1: off

  bool greedy() const { return temperature <= 0.0; }
  absl::Status Validate() const;
};

// Processed distributions for logits [n, V] (any float dtype): float32 [n, V] rows summing to 1.
at::Tensor Probabilities(const at::Tensor& logits, const SamplingParams& params);

// What verifiers read of the target's logits [n, V]: Probabilities(), except
// at temperature 0, where p is the one-hot of each row's argmax and every
// rule reads only that argmax (DeviceChainProblem::greedy): the logits
// themselves (float32), so that no one-hot rows are built.
at::Tensor TargetRows(const at::Tensor& logits, const SamplingParams& params);

// The largest entry's index in each row of scores [n, V] (logits or
// probabilities, float32), the first on ties: int64 [n]. What temperature 0
// picks; on CUDA a chunked kernel (fused::ArgmaxRows) rather than ATen's one
// block per row.
at::Tensor GreedyTokens(const at::Tensor& scores);

// One token per row of probs [n, V], drawn with `generator`: int64 [n].
at::Tensor SampleRows(const at::Tensor& probs, at::Generator& generator);

// SampleRows with the noise given: argmax_i probs[r][i] / noise[r][i] with
// noise [n, V] of i.i.d. Exp(1) values (drawn ahead, e.g. for a whole draft
// chain at once).
at::Tensor RaceRows(const at::Tensor& probs, const at::Tensor& noise);

// The draws of a sampled draft level in one go: out [n, V] = the
// Probabilities() of logits' rows `rows` (int64 [n], repeats allowed;
// undefined: every row), then RaceRows(out, noise): the tokens, int64 [n].
// A warp of a temperature and top_k alone is one launch on CUDA
// (fused::TopKSoftmaxRace); `out` is where the draft keeps its q rows.
at::Tensor WarpAndRace(const at::Tensor& logits, const at::Tensor& rows, const SamplingParams& warp,
                       const at::Tensor& noise, const at::Tensor& out);

// WarpAndRace's first `ranks` places of each row's race, best first: `ranks`
// draws without replacement from each q row (Gumbel-top-k; a place past q's
// support is a token of q = 0), int64 [n, ranks]. One launch on CUDA as
// WarpAndRace, for ranks <= 32.
at::Tensor WarpAndRaceRanks(const at::Tensor& logits, const at::Tensor& rows, const SamplingParams& warp,
                            const at::Tensor& noise, const at::Tensor& out, int64_t ranks);

// A generator for `device`, seeded: the same seed gives the same draws.
at::Generator MakeGenerator(c10::Device device, uint64_t seed);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_SAMPLING_H_
