// Rankings inside one block, for the tree builders' one-block kernels (a
// thread per entry, n <= the block's threads, keys and flags in shared
// memory): O(n) per thread, no sort, ties to the earlier entry as the ATen
// references' stable sorts give them; and the kept tree they write.
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

// Writes the entries whose thread has `in_tree` (and flags[i] = in_tree for
// every entry i) as a tree in entry order: node k is the k-th such entry,
// kept_tokens[k - 1] its token and kept_parents[k] its parent's node (0
// under the root, whose kept_parents[0] is -1). Every kept entry's parent
// entry is kept. node_of: shared scratch of an int per entry. Every thread
// of the block calls it, thread i for entry i.
__device__ __forceinline__ void WriteKeptTree(int i, bool in_tree, const unsigned char* flags, int* node_of,
                                              const int64_t* tokens, const int64_t* parents, int64_t* kept_tokens,
                                              int64_t* kept_parents) {
  if (in_tree) node_of[i] = 1 + Before(flags, i);
  __syncthreads();
  if (in_tree) {
    const int node = node_of[i];
    const int64_t up = parents[i];
    kept_tokens[node - 1] = tokens[i];
    kept_parents[node] = up < 0 ? 0 : node_of[up];
  }
  if (i == 0) kept_parents[0] = -1;
}

}  // namespace speclab::block_ranks

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_BLOCK_RANKS_CUH_
