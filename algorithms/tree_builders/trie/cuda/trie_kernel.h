// The `trie` builder's device tree (trie_device.h) on CUDA: the candidates
// merged, the host's nodes moved to the front, the fill, the depths and the
// ancestor mask, in one single-block launch (about 25 small ATen operations
// otherwise, each a host dispatch a pipelined step would wait on).
//
// Knows nothing of torch: trie_device.cc wraps it. Pointers are device
// pointers; `stream` is a cudaStream_t; the launch is asynchronous,
// allocates nothing, never synchronises and returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_TRIE_CUDA_TRIE_KERNEL_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_TRIE_CUDA_TRIE_KERNEL_H_

#include <cstdint>

namespace speclab {
namespace tree_builders {

// The most candidate tokens (candidates * max_tokens) one launch takes.
inline constexpr int kMaxTrieEntries = 4096;

// tokens [k, length] and lengths [k] int64 (DeviceContinuations), root [1]
// int64, budget >= 1. With n = 1 + min(budget, k * length), writes
// out_tokens, parents, depths [n] int64 and mask [n, n] bool: TrieOnDevice's
// tree; and drafted[0]: how many of its nodes past the root the host's trie
// has (the rest fill it), at least 1 (node 1, verified whatever it holds).
int LaunchTrieFromCandidates(const int64_t* tokens, const int64_t* lengths, const int64_t* root, int k, int length,
                             int budget, int64_t* out_tokens, int64_t* parents, int64_t* depths, bool* mask,
                             int64_t* drafted, void* stream);

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_TRIE_CUDA_TRIE_KERNEL_H_
