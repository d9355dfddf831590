#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_TOP_K_FRONTIER_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_TOP_K_FRONTIER_H_

// The selection of trees grown as top-k frontiers (EAGLE-2's dynamic_topk,
// OPT-Tree's opt_tree) on the device: one launch each on CUDA (kernels in
// cuda/frontier_kernels.h, for up to 1024 entries), ATen elsewhere.
#include <ATen/core/Tensor.h>

#include <vector>

namespace speclab::tree_builders {

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

// The `kept` best entries of a pool (tokens and parents' pool indices int64
// [P], -1 under the root; scores float64 [P]) as a tree of kept + 1 nodes in
// pool order (topological: node i + 1 is the i-th kept entry; ties go to the
// earlier entry, so a kept entry's parent, never scored below it, is kept):
// {tokens [kept], parents [kept + 1] (-1 for the root), depths [kept + 1],
// ancestor mask [kept + 1, kept + 1]}, as DeviceDrafter::DraftLevels' last
// kept tensors (tree_builders::KeptOnDevice).
std::vector<at::Tensor> KeptInOrder(const at::Tensor& pool_tokens, const at::Tensor& pool_parents,
                                    const at::Tensor& pool_scores, int64_t kept);

}  // namespace speclab::tree_builders

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_TOP_K_FRONTIER_H_
