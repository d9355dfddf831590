#include "algorithms/tree_builders/common/tree_shape.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace speclab {
namespace tree_builders {

std::string FormatPath(absl::Span<const int64_t> path) { return absl::StrCat("[", absl::StrJoin(path, ", "), "]"); }

int TreeShape::max_depth() const {
  int out = 0;
  for (const auto& p : paths_) out = std::max(out, static_cast<int>(p.size()));
  return out;
}

int TreeShape::RankSpan(int node) const {
  int span = 0;
  for (int child : children_[node]) span = std::max(span, rank(child) + 1);
  return span;
}

std::vector<int> TreeShape::NodesPerDepth() const {
  std::vector<int> counts(max_depth(), 0);
  for (int i = 1; i < size(); ++i) ++counts[depth(i) - 1];
  return counts;
}

int TreeShape::FirstRankGap() const {
  for (int node = 0; node < size(); ++node) {
    // Children are stored in rank order, so contiguity means rank(child j) == j.
    for (size_t j = 0; j < children_[node].size(); ++j)
      if (rank(children_[node][j]) != static_cast<int>(j)) return node;
  }
  return -1;
}

std::vector<std::vector<int64_t>> TreeShape::Choices() const {
  return std::vector<std::vector<int64_t>>(paths_.begin() + 1, paths_.end());
}

absl::StatusOr<TreeShape> ShapeFromChoices(const std::vector<std::vector<int64_t>>& choices) {
  std::map<std::vector<int64_t>, size_t> entry_of;  // path -> entry in `choices`
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::vector<int64_t>& path = choices[i];
    if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("entry ", i, " is an empty path"));
    for (int64_t r : path)
      if (r < 0)
        return absl::InvalidArgumentError(
            absl::StrCat("path ", FormatPath(path), " (entry ", i, ") has a negative rank"));
    auto [it, inserted] = entry_of.emplace(path, i);
    if (!inserted)
      return absl::InvalidArgumentError(absl::StrCat("path ", FormatPath(path), " (entry ", i,
                                                     ") repeats entry ", it->second));
  }
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::vector<int64_t>& path = choices[i];
    if (path.size() < 2) continue;
    std::vector<int64_t> prefix(path.begin(), path.end() - 1);
    if (!entry_of.count(prefix))
      return absl::InvalidArgumentError(absl::StrCat("path ", FormatPath(path), " (entry ", i,
                                                     ") has no parent path ", FormatPath(prefix),
                                                     ": choices must be prefix-closed"));
  }
  std::vector<std::vector<int64_t>> sorted = choices;
  // (depth, path) order: what Medusa's and EAGLE's tree buffers use.
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  TreeShape shape;
  shape.paths_.push_back({});
  shape.parents_.push_back(-1);
  shape.children_.emplace_back();
  std::map<std::vector<int64_t>, int> node_of{{{}, 0}};
  for (const auto& path : sorted) {
    const int node = shape.size();
    const int parent = node_of.at(std::vector<int64_t>(path.begin(), path.end() - 1));
    shape.paths_.push_back(path);
    shape.parents_.push_back(parent);
    shape.children_.emplace_back();
    shape.children_[parent].push_back(node);
    node_of[path] = node;
  }
  return shape;
}

}  // namespace tree_builders
}  // namespace speclab
