// Top-k frontier selection on CUDA (top_k_frontier.h): a level's frontier, and the kept tree.
// Torch-free, as framework/model/cuda/tree_kernels.h: device pointers to
// contiguous data, `stream` a cudaStream_t; asynchronous, allocating
// nothing, never synchronising (graph-capturable); returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_FRONTIER_KERNELS_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_FRONTIER_KERNELS_H_

#include <cstdint>

#include "framework/model/cuda/tree_kernels.h"

namespace speclab {
namespace frontier_kernels {

using tree_kernels::kMaxTreeItems;

// out = the indices of the `count` largest scores[i] (among equal scores the
// smaller index; NaN above every number; -0 equal to +0), in increasing
// index order. scores [n] float64; out [count] int64. 1 <= count <= n <=
// kMaxTreeItems. One block.
int LaunchBestInOrder(const double* scores, int64_t* out, int64_t n, int64_t count, void* stream);

// One frontier step of a top-k tree (EAGLE-2's): frontier node i (score
// frontier_scores[i], pool index frontier_pool[i]) has children
// top_tokens[i][j] with log-probabilities top_scores[i][j]; child (i, j) is
// pool entry offset + i * k + j, scored frontier_scores[i] + top_scores[i][j]
// in float64. Writes the k * k children into pool_tokens, pool_parents and
// pool_scores at offset, and the next frontier, the k best children (among
// equal scores the earlier entry) in pool order: next_tokens, next_rows (the
// frontier row each extends), next_scores, next_pool. 1 <= k <= 32. One block.
int LaunchExpandFrontier(const float* top_scores, const int64_t* top_tokens, const double* frontier_scores,
                         const int64_t* frontier_pool, int64_t* pool_tokens, int64_t* pool_parents,
                         double* pool_scores, int64_t offset, int64_t* next_tokens, int64_t* next_rows,
                         double* next_scores, int64_t* next_pool, int k, void* stream);

}  // namespace frontier_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_FRONTIER_KERNELS_H_
