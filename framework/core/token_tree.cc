#include "framework/core/token_tree.h"

#include <algorithm>
#include <cassert>

namespace speclab {

TokenTree::TokenTree(int32_t root_token)
    : tokens_{root_token}, parents_{-1}, depths_{0}, children_(1) {}

int TokenTree::AddNode(int parent, int32_t token) {
  assert(parent >= 0 && parent < size());
  const int index = size();
  tokens_.push_back(token);
  parents_.push_back(parent);
  depths_.push_back(depths_[parent] + 1);
  children_.emplace_back();
  children_[parent].push_back(index);
  return index;
}

int TokenTree::max_depth() const { return *std::max_element(depths_.begin(), depths_.end()); }

bool TokenTree::IsChain() const {
  return std::all_of(children_.begin(), children_.end(),
                     [](const std::vector<int>& c) { return c.size() <= 1; });
}

bool TokenTree::IsAncestorOrSelf(int ancestor, int node) const {
  while (node > ancestor) node = parents_[node];  // parents have smaller indices
  return node == ancestor;
}

std::vector<int> TokenTree::PathTo(int node) const {
  std::vector<int> path(depths_[node] + 1);
  for (int i = depths_[node]; i >= 0; --i, node = parents_[node]) path[i] = node;
  return path;
}

std::vector<int32_t> TokenTree::PathTokens(int node) const {
  std::vector<int32_t> out;
  for (int i : PathTo(node)) out.push_back(tokens_[i]);
  return out;
}

std::vector<int> TokenTree::Leaves() const {
  std::vector<int> leaves;
  for (int i = 0; i < size(); ++i)
    if (children_[i].empty()) leaves.push_back(i);
  return leaves;
}

int TokenTree::FindChild(int node, int32_t token) const {
  for (int c : children_[node])
    if (tokens_[c] == token) return c;
  return -1;
}

std::vector<uint8_t> TokenTree::AncestorMask() const {
  const int n = size();
  std::vector<uint8_t> mask(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n; ++i) {
    // Row i is row parent(i) plus the diagonal (EAGLE-2's eye | mask[parent]).
    if (parents_[i] >= 0)
      std::copy_n(&mask[static_cast<size_t>(parents_[i]) * n], n, &mask[static_cast<size_t>(i) * n]);
    mask[static_cast<size_t>(i) * n + i] = 1;
  }
  return mask;
}

std::vector<int64_t> TokenTree::Positions(int64_t base) const {
  std::vector<int64_t> pos(depths_.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = base + depths_[i];
  return pos;
}

}  // namespace speclab
