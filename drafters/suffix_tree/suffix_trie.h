// SuffixTrie: every substring of up to `max_depth` tokens of the sequences
// given to it, with how often it occurs: the suffix tree of SuffixDecoding
// (docs/algorithms.md §4.7), uncompressed. And its speculation: the
// continuations of a matched context, grown best first by their empirical
// probability.
#ifndef SPECLAB_DRAFTERS_SUFFIX_TREE_SUFFIX_TRIE_H_
#define SPECLAB_DRAFTERS_SUFFIX_TREE_SUFFIX_TRIE_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "absl/types/span.h"

namespace speclab::suffix_decoding {

// A speculation: tokens in the order they were chosen, each under its parent
// (an earlier index, or -1 under the root).
struct Draft {
  std::vector<int32_t> tokens;
  std::vector<int> parents;
  std::vector<double> probabilities;  // each token's estimated probability
  double score = 0;                   // their sum: the expected accepted tokens
  int match_length = 0;               // the context suffix it continues
};

struct SpeculationLimits {
  int max_tokens = 16;           // drafted tokens in all
  int max_path = 16;             // tokens on any path
  double max_spec_factor = 1.0;  // at most factor * match length + offset tokens
  double max_spec_offset = 0.0;
  double min_token_prob = 0.1;   // drop continuations estimated less likely
  bool tree = true;              // false: one path, each node's most frequent child
};

// Each drafted node of `draft` as its path from the root, in the order
// drafted (a trie inserting them in turn adds one node each).
std::vector<std::vector<int32_t>> DraftPaths(const Draft& draft);

// The tokens a match of `match_length` tokens may draft: min(max_tokens,
// factor * m + offset), at least 0.
int MatchBudget(const SpeculationLimits& limits, int match_length);

class SuffixTrie;

// The nodes of a text's last substrings in a trie: what Speculate() would
// find by walking from the root for each match length, kept up to date token
// by token. A trie keeps one over the sequence it is extending; one
// advanced over a text the trie is not part of (a generation, matched
// against the earlier generations' trie) is valid while the trie does not
// change: Reset() after it grows.
class SuffixCursor {
 public:
  // An empty text.
  void Reset();
  // The text grows by `tokens`; `trie` is the one matched against.
  void Advance(const SuffixTrie& trie, absl::Span<const int32_t> tokens);
  // The longest suffix of the text that the trie holds (at most max_depth).
  int matched() const { return static_cast<int>(nodes_.size()); }

 private:
  friend class SuffixTrie;
  // The text grew by `token`, whose substrings ending here are `nodes`.
  void Push(int32_t token, std::vector<int> nodes, int max_depth);
  // Whether `context` ends as the text does (an empty text: never).
  bool EndsWith(absl::Span<const int32_t> context) const;

  const SuffixTrie* trie_ = nullptr;  // the trie the nodes are of (Advance's)
  std::vector<int> nodes_;            // of the text's last 1, 2, ... tokens, while the trie holds them
  std::vector<int32_t> tail_;         // the text's last max_depth tokens
};

class SuffixTrie {
 public:
  explicit SuffixTrie(int max_depth);

  // Appends tokens to the current sequence: every substring ending at each
  // of them, up to max_depth tokens, is counted once more.
  void Extend(absl::Span<const int32_t> tokens);
  // Ends the current sequence: the next Extend() starts a new one.
  void EndSequence();

  // For match lengths m = 1, 2, ... (while the context's last m tokens occur
  // and m < |context|, m <= max_depth): the tree grown best first from their
  // node, each child's probability its parent's times count(child) /
  // count(node) (computed as count(child) / count(match node), to which the
  // product telescopes), at most MatchBudget(limits, m) tokens (with
  // `tree` false: the path of most frequent children, while its probability
  // stays above min_token_prob). The draft of largest score (ties: the
  // longer match) is returned. `cursor`, where given, is one advanced over
  // a text against this trie: where the context ends as that text does, its
  // nodes are taken instead of walks from the root (the same drafts).
  Draft Speculate(absl::Span<const int32_t> context, const SpeculationLimits& limits,
                  const SuffixCursor* cursor = nullptr) const;

  // How often `substring` (1..max_depth tokens) occurs within the sequences.
  int64_t Count(absl::Span<const int32_t> substring) const;

  int max_depth() const { return max_depth_; }
  int64_t size() const { return static_cast<int64_t>(nodes_.size()); }

 private:
  friend class SuffixCursor;
  struct Node {
    int64_t count = 0;
    int depth = 0;
    std::vector<int> children;
  };

  int Child(int node, int32_t token) const;  // -1 if absent
  int Find(absl::Span<const int32_t> substring) const;  // its node, or -1
  int AddChild(int node, int32_t token);
  Draft Grow(int node, int match_length, int max_tokens, const SpeculationLimits& limits) const;

  int max_depth_;
  std::vector<Node> nodes_;                    // nodes_[0]: the root
  std::vector<int32_t> node_token_;            // the token into each node
  std::unordered_map<uint64_t, int> edges_;    // (node << 32 | token) -> child
  SuffixCursor own_;                           // over the sequence being extended
};

}  // namespace speclab::suffix_decoding

#endif  // SPECLAB_DRAFTERS_SUFFIX_TREE_SUFFIX_TRIE_H_
