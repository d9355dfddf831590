// TokenTree: the draft tree of one speculative step.
//
// Node 0 is the root: the last committed token, not yet fed to the target.
// Nodes are stored in topological order (a parent always precedes its
// children), so node indices double as KV-cache slot offsets for a tree
// forward. A chain is the tree in which every node has at most one child.
#ifndef SPECLAB_FRAMEWORK_CORE_TOKEN_TREE_H_
#define SPECLAB_FRAMEWORK_CORE_TOKEN_TREE_H_

#include <cstdint>
#include <vector>

namespace speclab {

class TokenTree {
 public:
  explicit TokenTree(int32_t root_token);

  // Appends a child of `parent` (which must already exist) and returns its index.
  int AddNode(int parent, int32_t token);

  // Replaces a node's token (builders that draft on the device fill tokens in late).
  void set_token(int node, int32_t token) { tokens_[node] = token; }

  int size() const { return static_cast<int>(tokens_.size()); }
  int32_t token(int node) const { return tokens_[node]; }
  int parent(int node) const { return parents_[node]; }  // -1 for the root
  int depth(int node) const { return depths_[node]; }    // 0 for the root
  const std::vector<int>& children(int node) const { return children_[node]; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int max_depth() const;
  bool IsChain() const;

  // True iff `ancestor` is `node` or lies on the root-to-`node` path.
  bool IsAncestorOrSelf(int ancestor, int node) const;
  // Node indices root..node inclusive.
  std::vector<int> PathTo(int node) const;
  // Tokens on root..node inclusive.
  std::vector<int32_t> PathTokens(int node) const;
  // Nodes without children, in index order.
  std::vector<int> Leaves() const;
  // Child of `node` carrying `token`, or -1.
  int FindChild(int node, int32_t token) const;

  // Row-major n x n ancestor mask: mask[i*n + j] = 1 iff j is i or an ancestor of i.
  std::vector<uint8_t> AncestorMask() const;
  // Position id of every node: base + depth.
  std::vector<int64_t> Positions(int64_t base) const;

 private:
  std::vector<int32_t> tokens_;
  std::vector<int> parents_;
  std::vector<int> depths_;
  std::vector<std::vector<int>> children_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_TOKEN_TREE_H_
