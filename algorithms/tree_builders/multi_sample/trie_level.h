// The bookkeeping of one level of multi_sample's trie, drawn on the device.
//
// Level l holds the k sequences' l-th draws. A draw sits at the trie node of
// the first draw (in sequence order) with the same parent and token, so that
// repeated draws share their node's context, and every draw is recorded as a
// node of its own (the layout of sequence_trie.h). On CUDA one kernel
// (cuda/trie_level.h) does what the ATen reference does in ten small ops;
// both give the same integers.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_TRIE_LEVEL_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_TRIE_LEVEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace speclab::tree_builders {

struct TrieLevel {
  at::Tensor first;  // [k] int64: the first draw of the level with the same parent and token
  at::Tensor node;   // [k] int64: the trie node of that first draw, 1 + level * k + first
};

// Records level `level`'s draws: tokens [k] int64 and their parents [k] int64
// (trie nodes; undefined at level 0, where every parent is the root, node 0)
// into all_tokens [k * length] (slots level * k ..) and all_parents
// [1 + k * length] (slots 1 + level * k ..; slot 0 becomes -1 at level 0).
TrieLevel RecordTrieLevel(const at::Tensor& tokens, const at::Tensor& parents, int64_t level,
                          const at::Tensor& all_tokens, const at::Tensor& all_parents);

// The ATen reference, which RecordTrieLevel runs where the kernel does not.
TrieLevel RecordTrieLevelAten(const at::Tensor& tokens, const at::Tensor& parents, int64_t level,
                              const at::Tensor& all_tokens, const at::Tensor& all_parents);

}  // namespace speclab::tree_builders

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_TRIE_LEVEL_H_
