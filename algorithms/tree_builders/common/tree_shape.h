// TreeShape: a fixed draft-tree shape, written as Medusa-style choices.
//
// A shape is a prefix-closed list of paths of 0-based child ranks from the
// root (docs/algorithms.md §2.3): [0, 1] is the rank-1 child of the rank-0
// child of the root. What a rank means (the i-th most likely token, or the
// i-th draw without replacement) is up to the builder that drafts the shape
// (shape_drafting.h). Nodes are stored sorted by (depth, path), as Medusa and
// EAGLE sort them, so parents precede children and siblings come in rank
// order: the order the TokenTree of a step needs.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_TREE_SHAPE_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_TREE_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace speclab {
namespace tree_builders {

class TreeShape {
 public:
  // Node 0 is the root (empty path).
  int size() const { return static_cast<int>(paths_.size()); }
  const std::vector<int64_t>& path(int node) const { return paths_[node]; }
  int parent(int node) const { return parents_[node]; }  // -1 for the root
  int rank(int node) const { return paths_[node].empty() ? -1 : static_cast<int>(paths_[node].back()); }
  int depth(int node) const { return static_cast<int>(paths_[node].size()); }
  const std::vector<int>& children(int node) const { return children_[node]; }
  int max_depth() const;
  // 1 + the largest rank among `node`'s children (0 for a leaf).
  int RankSpan(int node) const;
  // Drafted nodes per depth 1..max_depth.
  std::vector<int> NodesPerDepth() const;

  // The first node (in node order) whose children do not use exactly ranks
  // 0..c-1, or -1. Sampling without replacement needs contiguous ranks: the
  // child of rank r is the r-th draw, whose law depends on every earlier draw
  // being a sibling the verifier can mask (§1.6).
  int FirstRankGap() const;

  // The shape back as choices (root excluded), in node order.
  std::vector<std::vector<int64_t>> Choices() const;

  friend absl::StatusOr<TreeShape> ShapeFromChoices(const std::vector<std::vector<int64_t>>& choices);

 private:
  std::vector<std::vector<int64_t>> paths_;
  std::vector<int> parents_;
  std::vector<std::vector<int>> children_;
};

// Validates and sorts `choices`: ranks >= 0, no empty or repeated path, and
// prefix-closed (every path's parent path is listed). Errors name the
// offending path and its 0-based entry in `choices`.
absl::StatusOr<TreeShape> ShapeFromChoices(const std::vector<std::vector<int64_t>>& choices);

// "[0, 1, 2]".
std::string FormatPath(absl::Span<const int64_t> path);

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_TREE_SHAPE_H_
