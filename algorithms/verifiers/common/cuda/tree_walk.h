// The sample-then-match walk of a tree, on CUDA (the tree rules' device forms).
// Torch-free, as framework/model/cuda/tree_kernels.h: device pointers to
// contiguous data, `stream` a cudaStream_t; asynchronous, allocating
// nothing, never synchronising (graph-capturable); returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_TREE_WALK_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_TREE_WALK_H_

#include <cstdint>

#include "framework/model/cuda/tree_kernels.h"

namespace speclab {
namespace tree_walk_kernels {

using tree_kernels::kMaxTreeItems;

// The sample-then-match walk of a tree: from the root, descend into the
// first child (in index order) whose token equals y at the current node,
// until none does. parents (as LaunchTreeMask's), tokens, y [n] int64;
// out [n + 1] int64: the number a of accepted nodes, the accepted nodes
// root-down in out[1..a] (0 after), then y at the node where the walk
// stopped. 1 <= n <= kMaxTreeItems. One thread.
int LaunchTreeWalk(const int64_t* parents, const int64_t* tokens, const int64_t* y, int64_t* out, int64_t n,
                   void* stream);

}  // namespace tree_walk_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_TREE_WALK_H_
