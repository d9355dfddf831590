// One level of multi_sample's trie bookkeeping, on CUDA (see ../trie_level.h).
// Torch-free, as framework/model/cuda/row_kernels.h: device pointers to
// contiguous data, `stream` a cudaStream_t; asynchronous, allocating
// nothing, never synchronising (graph-capturable); returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_CUDA_TRIE_LEVEL_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_CUDA_TRIE_LEVEL_H_

#include <cstdint>

namespace speclab {
namespace trie_level_kernels {

constexpr int64_t kMaxDraws = 1024;

// The k draws of trie level `level`: tokens [k], parents [k] (null at level
// 0: every draw's parent is the root, node 0). Writes draw i's token and
// parent to all_tokens[level * k + i] and all_parents[1 + level * k + i]
// (all_parents[0] = -1 at level 0), first[i] = the smallest j with the same
// parent and token, and node[i] = 1 + level * k + first[i], the trie node
// draw i sits at. 1 <= k <= kMaxDraws.
int LaunchTrieLevel(const int64_t* tokens, const int64_t* parents, int64_t k, int64_t level, int64_t* all_tokens,
                    int64_t* all_parents, int64_t* first, int64_t* node, void* stream);

}  // namespace trie_level_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_CUDA_TRIE_LEVEL_H_
