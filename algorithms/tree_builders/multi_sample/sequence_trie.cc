#include "algorithms/tree_builders/multi_sample/sequence_trie.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace speclab {
namespace tree_builders {

SequenceTrie::SequenceTrie(int32_t root_token, int sequences) : tree_(root_token), at_(sequences, 0) {}

std::vector<int> SequenceTrie::Frontier() const {
  std::vector<int> nodes;
  for (int node : at_)
    if (node >= 0) nodes.push_back(node);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

std::vector<int> SequenceTrie::SequencesAt(int node) const {
  std::vector<int> out;
  for (size_t s = 0; s < at_.size(); ++s)
    if (at_[s] == node) out.push_back(static_cast<int>(s));
  return out;
}

int SequenceTrie::live_sequences() const {
  return static_cast<int>(std::count_if(at_.begin(), at_.end(), [](int node) { return node >= 0; }));
}

absl::StatusOr<std::vector<int>> SequenceTrie::Extend(const std::vector<std::vector<int32_t>>& draws) {
  const std::vector<int> frontier = Frontier();
  if (draws.size() != frontier.size())
    return absl::InvalidArgumentError(
        absl::StrCat("got draws for ", draws.size(), " nodes, the frontier has ", frontier.size()));
  std::vector<int> parent_position;
  std::vector<int> next = at_;
  for (size_t f = 0; f < frontier.size(); ++f) {
    const int node = frontier[f];
    const std::vector<int> sequences = SequencesAt(node);
    if (draws[f].size() > sequences.size())
      return absl::InvalidArgumentError(absl::StrCat("node ", node, " got ", draws[f].size(), " draws for ",
                                                     sequences.size(), " sequences"));
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (i >= draws[f].size()) {
        next[sequences[i]] = -1;  // no draw left for this sequence
        continue;
      }
      tree_.AddNode(node, draws[f][i]);  // every draw is a child, repeats included
      parent_position.push_back(static_cast<int>(f));
      next[sequences[i]] = tree_.FindChild(node, draws[f][i]);  // the first child with that token
    }
  }
  at_ = std::move(next);
  return parent_position;
}

}  // namespace tree_builders
}  // namespace speclab
