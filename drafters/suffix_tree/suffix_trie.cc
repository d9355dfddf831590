#include "drafters/suffix_tree/suffix_trie.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>

namespace speclab::suffix_decoding {
namespace {

uint64_t EdgeKey(int node, int32_t token) {
  return (static_cast<uint64_t>(node) << 32) | static_cast<uint32_t>(token);
}

}  // namespace

SuffixTrie::SuffixTrie(int max_depth) : max_depth_(max_depth), nodes_(1), node_token_(1, -1) {}

int SuffixTrie::Child(int node, int32_t token) const {
  auto found = edges_.find(EdgeKey(node, token));
  return found == edges_.end() ? -1 : found->second;
}

int SuffixTrie::AddChild(int node, int32_t token) {
  const int existing = Child(node, token);
  if (existing >= 0) return existing;
  const int child = static_cast<int>(nodes_.size());
  nodes_.push_back({.count = 0, .depth = nodes_[node].depth + 1});
  node_token_.push_back(token);
  nodes_[node].children.push_back(child);
  edges_.emplace(EdgeKey(node, token), child);
  return child;
}

void SuffixTrie::Extend(absl::Span<const int32_t> tokens) {
  for (int32_t token : tokens) {
    // The substrings ending here: the token alone, and each one ending before
    // it extended by it (added where new), each counted once more.
    std::vector<int> next;
    for (int i = -1; i < static_cast<int>(own_.nodes_.size()); ++i) {
      const int from = i < 0 ? 0 : own_.nodes_[i];
      if (nodes_[from].depth >= max_depth_) break;
      const int child = AddChild(from, token);
      ++nodes_[child].count;
      next.push_back(child);
    }
    ++nodes_[0].count;
    own_.Push(token, std::move(next), max_depth_);
  }
}

void SuffixTrie::EndSequence() { own_.Reset(); }

int SuffixTrie::Find(absl::Span<const int32_t> substring) const {
  int node = 0;
  for (size_t i = 0; i < substring.size() && node >= 0; ++i) node = Child(node, substring[i]);
  return node;
}

int64_t SuffixTrie::Count(absl::Span<const int32_t> substring) const {
  const int node = substring.empty() ? -1 : Find(substring);
  return node < 0 ? 0 : nodes_[node].count;
}

std::vector<std::vector<int32_t>> DraftPaths(const Draft& draft) {
  std::vector<std::vector<int32_t>> paths;
  for (size_t i = 0; i < draft.tokens.size(); ++i) {
    std::vector<int32_t> path = draft.parents[i] < 0 ? std::vector<int32_t>{} : paths[draft.parents[i]];
    path.push_back(draft.tokens[i]);
    paths.push_back(std::move(path));
  }
  return paths;
}

int MatchBudget(const SpeculationLimits& limits, int match_length) {
  return std::max(0, std::min(limits.max_tokens, static_cast<int>(match_length * limits.max_spec_factor +
                                                                   limits.max_spec_offset + 1e-6)));
}

Draft SuffixTrie::Grow(int node, int match_length, int max_tokens, const SpeculationLimits& limits) const {
  Draft draft;
  draft.match_length = match_length;
  // (probability, -order, trie node, draft parent, path length): best first,
  // ties to the candidate pushed first. A node's probability, its parent's
  // times count(node) / count(parent), telescopes to count(node) /
  // count(match): computed so, equal counts tie exactly and the order is
  // the counts' (which the device form, device_suffix_speculation.h, follows).
  using Item = std::tuple<double, int64_t, int, int, int>;
  std::priority_queue<Item> queue;
  int64_t order = 0;
  const double matched = static_cast<double>(nodes_[node].count);
  auto push_children = [&](int from, int parent, int path) {
    if (path >= limits.max_path) return;
    int most_frequent = -1;  // the first child of the largest count
    for (int child : nodes_[from].children) {
      if (!limits.tree) {
        if (most_frequent < 0 || nodes_[child].count > nodes_[most_frequent].count) most_frequent = child;
        continue;
      }
      const double p = static_cast<double>(nodes_[child].count) / matched;
      if (p >= limits.min_token_prob) queue.emplace(p, -order++, child, parent, path + 1);
    }
    if (most_frequent >= 0) {
      const double p = static_cast<double>(nodes_[most_frequent].count) / matched;
      if (p >= limits.min_token_prob) queue.emplace(p, -order++, most_frequent, parent, path + 1);
    }
  };
  push_children(node, -1, 0);
  while (static_cast<int>(draft.tokens.size()) < max_tokens && !queue.empty()) {
    const auto [probability, unused, child, parent, path] = queue.top();
    queue.pop();
    draft.tokens.push_back(node_token_[child]);
    draft.parents.push_back(parent);
    draft.probabilities.push_back(probability);
    draft.score += probability;
    push_children(child, static_cast<int>(draft.tokens.size()) - 1, path);
  }
  return draft;
}

void SuffixCursor::Reset() {
  trie_ = nullptr;
  nodes_.clear();
  tail_.clear();
}

void SuffixCursor::Advance(const SuffixTrie& trie, absl::Span<const int32_t> tokens) {
  trie_ = &trie;
  for (int32_t token : tokens) {
    // The substrings ending here, shortest first, while the trie holds them
    // (it holds every suffix of a substring it holds).
    std::vector<int> next;
    for (int i = -1; i < static_cast<int>(nodes_.size()); ++i) {
      const int from = i < 0 ? 0 : nodes_[i];
      if (trie.nodes_[from].depth >= trie.max_depth_) break;
      const int child = trie.Child(from, token);
      if (child < 0) break;
      next.push_back(child);
    }
    Push(token, std::move(next), trie.max_depth_);
  }
}

void SuffixCursor::Push(int32_t token, std::vector<int> nodes, int max_depth) {
  nodes_ = std::move(nodes);
  tail_.push_back(token);
  if (static_cast<int>(tail_.size()) > max_depth) tail_.erase(tail_.begin());
}

bool SuffixCursor::EndsWith(absl::Span<const int32_t> context) const {
  return !tail_.empty() && context.size() >= tail_.size() &&
         std::equal(tail_.begin(), tail_.end(), context.end() - tail_.size());
}

Draft SuffixTrie::Speculate(absl::Span<const int32_t> context, const SpeculationLimits& limits,
                            const SuffixCursor* cursor) const {
  Draft best;
  // The node of the last m tokens: where the context ends with the current
  // sequence (a generation's own trie, asked at its end), the one Extend()
  // left; where it ends as the cursor's text, the cursor's; else found
  // afresh, walking from the root.
  const std::vector<int>* known = nullptr;
  if (own_.EndsWith(context)) {
    known = &own_.nodes_;
  } else if (cursor != nullptr && cursor->trie_ == this && cursor->EndsWith(context)) {
    known = &cursor->nodes_;
  }
  for (int m = 1; m < static_cast<int>(context.size()) && m <= max_depth_; ++m) {
    const int node = known != nullptr && m <= static_cast<int>(known->size())
                         ? (*known)[m - 1]
                         : Find(context.subspan(context.size() - m));
    if (node < 0) break;
    Draft draft = Grow(node, m, MatchBudget(limits, m), limits);
    if (draft.score >= best.score) best = std::move(draft);
  }
  return best;
}

}  // namespace speclab::suffix_decoding
