// The `trie` builder's device form: the tree Build() inserts from a
// drafter's candidates, made on the device from DeviceDrafter::ContinuationsAt
// in one fixed shape, so that pipelined steps never read it back.
//
// Build() inserts candidate c's tokens in order, candidate by candidate: a
// token already under its parent is shared, a new one becomes a node while
// the budget lasts. Here candidate c's token i is a node of the host's trie
// when its first i + 1 tokens start no earlier candidate (it is the first of
// its prefix) and fewer than `budget` such nodes come before it in (c, i)
// order; its parent is the node of its first i tokens. Those nodes come
// first, in the host's order; the tree is filled to 1 + min(budget,
// candidates * max_tokens) nodes by copies of node 1 under the root: later
// siblings of node 1 with its token, which a sample-then-match walk
// (greedy's, point_mass's: the first child in index order) never enters.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_TRIE_TRIE_DEVICE_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_TRIE_TRIE_DEVICE_H_

#include <ATen/core/Tensor.h>

#include "framework/device/device_drafter.h"
#include "framework/draft_tree.h"

namespace speclab::tree_builders {

// The tree above for candidates of at most `max_depth` tokens, rooted at
// root_token ([1] int64): tokens [n] (root first), device_shape (parents,
// depths, ancestor mask; depth_bound = max_depth), kDeterministic, and
// drafted_nodes: the host's trie's nodes past the root, or 1 where it has
// none (node 1, a copy of the root's token then, is verified all the same).
DraftTree TrieOnDevice(const at::Tensor& root_token, const DeviceContinuations& candidates, int budget);

}  // namespace speclab::tree_builders

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_TRIE_TRIE_DEVICE_H_
