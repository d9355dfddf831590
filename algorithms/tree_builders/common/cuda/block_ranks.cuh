// Rankings inside one block, for the tree builders' one-block kernels (a
// thread per entry, n <= the block's threads, keys and flags in shared
// memory): O(n) per thread, no sort, ties to the earlier entry as the ATen
// references' stable sorts give them.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_BLOCK_RANKS_CUH_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_BLOCK_RANKS_CUH_

#include <cstdint>

namespace speclab::block_ranks {

// Entries of keys[0..n) above entry i (a larger key, or an equal one earlier).
__device__ __forceinline__ int Above(const uint64_t* keys, int n, int i) {
  int above = 0;
  for (int j = 0; j < n; ++j) above += keys[j] > keys[i] || (keys[j] == keys[i] && j < i);
  return above;
}

// flags[j] set for j < i.
__device__ __forceinline__ int Before(const unsigned char* flags, int i) {
  int before = 0;
  for (int j = 0; j < i; ++j) before += flags[j];
  return before;
}

}  // namespace speclab::block_ranks

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_BLOCK_RANKS_CUH_
