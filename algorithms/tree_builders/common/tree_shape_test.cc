#include "algorithms/tree_builders/common/tree_shape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "framework/core/options.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TreeShapeTest, SortsByDepthThenPathSoParentsPrecedeChildren) {
  auto shape = ShapeFromChoices({{1, 0}, {0}, {0, 1}, {1}, {0, 0}, {0, 0, 0}});
  ASSERT_TRUE(shape.ok()) << shape.status();
  ASSERT_EQ(shape->size(), 7);
  EXPECT_THAT(shape->Choices(), ElementsAre(std::vector<int64_t>{0}, std::vector<int64_t>{1},
                                            std::vector<int64_t>{0, 0}, std::vector<int64_t>{0, 1},
                                            std::vector<int64_t>{1, 0}, std::vector<int64_t>{0, 0, 0}));
  for (int i = 1; i < shape->size(); ++i) EXPECT_LT(shape->parent(i), i);
  EXPECT_EQ(shape->parent(5), 2);  // [1, 0] under [1]
  EXPECT_EQ(shape->rank(4), 1);
  EXPECT_THAT(shape->NodesPerDepth(), ElementsAre(2, 3, 1));
  EXPECT_EQ(shape->RankSpan(0), 2);
  EXPECT_EQ(shape->FirstRankGap(), -1);
}

TEST(TreeShapeTest, RejectsPathsThatAreNotPrefixClosedNamingThePath) {
  auto shape = ShapeFromChoices({{0}, {0, 0}, {1, 2, 0}, {1}});
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(shape.status().message(), HasSubstr("[1, 2, 0] (entry 2) has no parent path [1, 2]"));
}

TEST(TreeShapeTest, RejectsEmptyRepeatedAndNegativePaths) {
  EXPECT_THAT(ShapeFromChoices({{0}, {}}).status().message(), HasSubstr("entry 1 is an empty path"));
  EXPECT_THAT(ShapeFromChoices({{0}, {0}}).status().message(), HasSubstr("[0] (entry 1) repeats entry 0"));
  EXPECT_THAT(ShapeFromChoices({{0}, {0, -1}}).status().message(), HasSubstr("[0, -1] (entry 1) has a negative rank"));
}

TEST(TreeShapeTest, FindsRankGaps) {
  auto shape = ShapeFromChoices({{0}, {2}, {0, 1}});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->FirstRankGap(), 0);  // the root's children are ranks 0 and 2
  EXPECT_EQ(shape->RankSpan(0), 3);
}

// The shipped trees (configs/trees/) have the sizes of docs/algorithms.md §2.3.
TEST(TreeShapeTest, ShippedTreesHaveTheReferenceShapes) {
  struct Tree {
    std::string file;
    std::vector<int> per_depth;
  };
  for (const Tree& t : {Tree{"medusa_mc_sim_7b_63.yaml", {10, 28, 23, 2}}, Tree{"eagle_mc_sim_7b_63.yaml", {4, 8, 8, 3, 2}}}) {
    auto options = Options::FromFile(std::string(SPECLAB_SOURCE_DIR) + "/configs/trees/" + t.file);
    ASSERT_TRUE(options.ok()) << options.status();
    auto choices = options->GetIntListList("choices");
    ASSERT_TRUE(choices.ok()) << choices.status();
    auto shape = ShapeFromChoices(*choices);
    ASSERT_TRUE(shape.ok()) << t.file << ": " << shape.status();
    EXPECT_EQ(shape->NodesPerDepth(), t.per_depth) << t.file;
    EXPECT_EQ(shape->FirstRankGap(), -1) << t.file << " must also work with sampling: true";
  }
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
