#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_DYNAMIC_TOPK_FRONTIER_OPS_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_DYNAMIC_TOPK_FRONTIER_OPS_H_

// dynamic_topk's selection on the device: one launch each on CUDA (its
// kernels in cuda/, for up to 1024 entries), ATen elsewhere.
#include <ATen/core/Tensor.h>

namespace speclab::dynamic_topk {

// The indices of the `count` largest entries of scores [n] float64 (among
// equal scores the smaller index; NaN above every number), in increasing
// order: int64 [count]. 1 <= count <= n. ATen: two stable sorts.
at::Tensor BestInOrder(const at::Tensor& scores, int64_t count);

// One frontier step of a top-k tree (EAGLE-2's): frontier node i (score
// frontier_scores[i] float64, pool index frontier_pool[i]) has children
// top_tokens[i][j] (int64 [k, k]) with log-probabilities top_scores[i][j]
// (float32 [k, k]); child (i, j) is pool entry offset + i * k + j, scored
// frontier_scores[i] + top_scores[i][j] in float64. Writes the k * k children
// into pool_tokens, pool_parents (int64) and pool_scores (float64) at offset,
// in place, and returns the next frontier: the k best children (among equal
// scores the earlier entry) in pool order. One launch on CUDA for k <= 32.
struct Frontier {
  at::Tensor tokens;  // [k] int64
  at::Tensor rows;    // [k] int64: the frontier row each extends
  at::Tensor scores;  // [k] float64
  at::Tensor pool;    // [k] int64: pool indices
};
Frontier ExpandFrontier(const at::Tensor& top_scores, const at::Tensor& top_tokens, const at::Tensor& frontier_scores,
                        const at::Tensor& frontier_pool, const at::Tensor& pool_tokens, const at::Tensor& pool_parents,
                        const at::Tensor& pool_scores, int64_t offset);

}  // namespace speclab::dynamic_topk

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_DYNAMIC_TOPK_FRONTIER_OPS_H_
