// SequenceTrie: K draft sequences drawn level by level and laid out as one
// token tree, in the form multi-draft verifiers are exact for.
//
// Every sequence sits at a node. At each level, the sequences at a node v
// draw their next tokens from q(·|path(v)), and every draw becomes its own
// child of v, in sequence order, even when it repeats a sibling's token.
// A sequence then continues from the FIRST child of v carrying its token, so
// sequences with identical prefixes share their nodes (the trie merge) and a
// repeated draw stays behind as a leaf.
//
// The law this gives, with replacement (draws i.i.d. from q):
//   given everything drawn above v, the children of v are k_v i.i.d. draws
//   from q(·|path(v)), k_v being the number of sequences that reached v.
// That is exactly what SpecInfer/RRS (§1.5), SpecTr (§1.7, which pools the
// drafts consistent with the accepted prefix) and Khisti (§1.8) assume at
// every node. Merging the repeated draws instead (one child per distinct
// token) would change the law: recursive rejection applies its residual
// update once per draw, duplicates included, so a deduplicated trie verified
// with those rules is lossy. The repeated leaves cost tree slots but are
// exactly what keeps the rules exact.
//
// Without replacement (each node's draws made jointly without replacement,
// RSD-C style, §1.6): siblings are distinct, so after the first level every
// sequence is alone and continues as a chain; when q has fewer tokens than
// sequences at a node, only |supp q| draws exist and the remaining
// sequences end there.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_SEQUENCE_TRIE_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_SEQUENCE_TRIE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/core/token_tree.h"

namespace speclab {
namespace tree_builders {

class SequenceTrie {
 public:
  SequenceTrie(int32_t root_token, int sequences);

  // Distinct nodes holding at least one live sequence, in index order: the
  // nodes whose q the next level draws from.
  std::vector<int> Frontier() const;
  // Live sequences at frontier node `node`, in sequence order.
  std::vector<int> SequencesAt(int node) const;
  int live_sequences() const;

  // One level. `draws[f]` are the tokens drawn at Frontier()[f], at most one
  // per sequence there (fewer ends the surplus sequences). Returns the new
  // nodes' parents' frontier positions, in the order the nodes were added.
  absl::StatusOr<std::vector<int>> Extend(const std::vector<std::vector<int32_t>>& draws);

  const TokenTree& tree() const { return tree_; }
  TokenTree& mutable_tree() { return tree_; }

 private:
  TokenTree tree_;
  std::vector<int> at_;  // node of each sequence; -1 once it ended
};

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_MULTI_SAMPLE_SEQUENCE_TRIE_H_
