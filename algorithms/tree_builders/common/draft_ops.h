// Device-side drafting operations shared by the tree builders.
//
// Builders keep drafting on the drafter's device and read back to the host
// at most once per tree level (ReadToHost), when the next level's shape
// depends on what was drawn.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_DRAFT_OPS_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_DRAFT_OPS_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/sampling.h"

namespace speclab {
namespace tree_builders {

struct TopK {
  at::Tensor tokens;  // [n, k] int64, best first
  at::Tensor scores;  // [n, k] the scores they were ranked by
};

// The k best tokens of every row of `scores` [n, V], best first (ties: the
// smaller id): a deterministic top-k. float32 rows and k <= 32 take one
// launch on CUDA (fused::TopKRows; at::topk's select costs some 30 us a
// call on a GPU, a static top-k tree calls it once a level).
TopK BestTokens(const at::Tensor& scores, int64_t k);

// The k most probable tokens of every row of logits [n, V] under the
// drafter's unwarped distribution, best first (ties: the smaller id), scored
// by their log-probabilities as float32 (one kernel on CUDA:
// fused::TopKLogSoftmax). Deterministic builders rank by these (as EAGLE-2
// and SpecExec do): the experiment's warp is what the verifier applies to p,
// and at temperature 0 the warped q is one-hot, which would leave every rank
// but 0 a tie.
TopK MostProbable(const at::Tensor& logits, int64_t k);

// k draws without replacement from every row of q [n, V], in draw order
// (Gumbel-top-k: the order of log q(x) + Gumbel_x is the order of successive
// draws without replacement). Scores are the perturbed keys in float64;
// a key of -inf marks a draw past the row's support (q(x) = 0), which the
// caller must drop: the law only defines as many draws as q has tokens.
// Noise is float64 so that U = 0 or 1 (a biased key) has probability ~2^-53.
TopK DrawWithoutReplacement(const at::Tensor& q, int64_t k, at::Generator& generator);

// Copies `parts` (any shapes and numeric dtypes) to the host as one flat
// float64 vector, in order: a single device-to-host transfer. Token ids stay
// exact (< 2^53).
std::vector<double> ReadToHost(const std::vector<at::Tensor>& parts);

// Host tokens (root first) as the DraftTree's int64 device tensor.
at::Tensor TokensToDevice(const std::vector<int32_t>& tokens, c10::Device device);

// Fails when k exceeds the vocabulary: a builder option that cannot be met.
absl::Status CheckWidth(const char* builder, const char* option, int64_t k, int64_t vocab);

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_DRAFT_OPS_H_
