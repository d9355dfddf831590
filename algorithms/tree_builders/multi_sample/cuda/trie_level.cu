// See trie_level.h.
#include "algorithms/tree_builders/multi_sample/cuda/trie_level.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace speclab {
namespace trie_level_kernels {
namespace {

// One block, a thread a draw: k <= kMaxDraws, so the k^2 comparisons are a
// few hundred at most per thread, all in shared memory.
__global__ void TrieLevel(const int64_t* __restrict__ tokens, const int64_t* __restrict__ parents, int64_t k,
                          int64_t level, int64_t* __restrict__ all_tokens, int64_t* __restrict__ all_parents,
                          int64_t* __restrict__ first, int64_t* __restrict__ node) {
  __shared__ int64_t shared_tokens[kMaxDraws];
  __shared__ int64_t shared_parents[kMaxDraws];
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) {
    shared_tokens[i] = tokens[i];
    shared_parents[i] = parents == nullptr ? 0 : parents[i];
  }
  __syncthreads();
  if (level == 0 && threadIdx.x == 0) all_parents[0] = -1;
  for (int64_t i = threadIdx.x; i < k; i += blockDim.x) {
    const int64_t token = shared_tokens[i], parent = shared_parents[i];
    int64_t j = 0;
    while (shared_tokens[j] != token || shared_parents[j] != parent) ++j;  // stops at i at the latest
    all_tokens[level * k + i] = token;
    all_parents[1 + level * k + i] = parent;
    first[i] = j;
    node[i] = 1 + level * k + j;
  }
}

}  // namespace

int LaunchTrieLevel(const int64_t* tokens, const int64_t* parents, int64_t k, int64_t level, int64_t* all_tokens,
                    int64_t* all_parents, int64_t* first, int64_t* node, void* stream) {
  if (k < 1 || k > kMaxDraws || level < 0) return cudaErrorInvalidValue;
  const unsigned threads = k < 32 ? 32u : k < 256 ? static_cast<unsigned>((k + 31) / 32 * 32) : 256u;
  TrieLevel<<<1, threads, 0, static_cast<cudaStream_t>(stream)>>>(tokens, parents, k, level, all_tokens, all_parents,
                                                                  first, node);
  return cudaGetLastError();
}

}  // namespace trie_level_kernels
}  // namespace speclab
