#include "framework/core/token_tree.h"

#include <gtest/gtest.h>

namespace speclab {
namespace {

// root(10) -> a(11) -> c(13)
//          -> b(12)
TokenTree SmallTree() {
  TokenTree tree(10);
  const int a = tree.AddNode(0, 11);
  tree.AddNode(0, 12);
  tree.AddNode(a, 13);
  return tree;
}

TEST(TokenTreeTest, AncestorMaskAndPositions) {
  const TokenTree tree = SmallTree();
  const std::vector<uint8_t> expected = {1, 0, 0, 0,   //
                                         1, 1, 0, 0,   //
                                         1, 0, 1, 0,   //
                                         1, 1, 0, 1};
  EXPECT_EQ(tree.AncestorMask(), expected);
  EXPECT_EQ(tree.Positions(7), (std::vector<int64_t>{7, 8, 8, 9}));
  EXPECT_EQ(tree.max_depth(), 2);
  EXPECT_FALSE(tree.IsChain());
}

TEST(TokenTreeTest, PathsLeavesAndChildren) {
  const TokenTree tree = SmallTree();
  EXPECT_EQ(tree.PathTo(3), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(tree.PathTokens(3), (std::vector<int32_t>{10, 11, 13}));
  EXPECT_EQ(tree.Leaves(), (std::vector<int>{2, 3}));
  EXPECT_EQ(tree.FindChild(0, 12), 2);
  EXPECT_EQ(tree.FindChild(0, 13), -1);
  EXPECT_TRUE(tree.IsAncestorOrSelf(1, 3));
  EXPECT_FALSE(tree.IsAncestorOrSelf(2, 3));
}

TEST(TokenTreeTest, ChainIsATreeWithCausalMask) {
  TokenTree chain(5);
  int node = 0;
  for (int32_t t : {6, 7, 8}) node = chain.AddNode(node, t);
  EXPECT_TRUE(chain.IsChain());
  const std::vector<uint8_t> mask = chain.AncestorMask();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(mask[i * 4 + j], j <= i ? 1 : 0) << i << "," << j;
  EXPECT_EQ(chain.Positions(0), (std::vector<int64_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace speclab
