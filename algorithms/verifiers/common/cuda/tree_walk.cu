// See tree_walk.h.
#include "algorithms/verifiers/common/cuda/tree_walk.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace speclab {
namespace tree_walk_kernels {
namespace {

constexpr int kThreads = static_cast<int>(kMaxTreeItems);

// One thread: n is a tree's size, a few dozen nodes, and the walk is a
// chain of dependent steps.
__global__ void TreeWalk(const int64_t* __restrict__ parents, const int64_t* __restrict__ tokens,
                         const int64_t* __restrict__ y, int64_t* __restrict__ out, int n) {
  int64_t node = 0, accepted = 0;
  for (int i = 1; i < n; ++i) out[i] = 0;
  for (int i = 1; i < n; ++i) {
    if (parents[i] == node && tokens[i] == y[node]) {  // children follow their parent in index order
      out[++accepted] = i;
      node = i;
    }
  }
  out[0] = accepted;
  out[n] = y[node];
}

}  // namespace

int LaunchTreeWalk(const int64_t* parents, const int64_t* tokens, const int64_t* y, int64_t* out, int64_t n,
                   void* stream) {
  if (n < 1 || n > kMaxTreeItems) return cudaErrorInvalidValue;
  TreeWalk<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(parents, tokens, y, out, static_cast<int>(n));
  return cudaGetLastError();
}

}  // namespace tree_walk_kernels
}  // namespace speclab
