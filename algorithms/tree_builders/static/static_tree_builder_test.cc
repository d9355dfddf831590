#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "algorithms/tree_builders/testing/builder_harness.h"
#include "algorithms/tree_builders/testing/table_drafter.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::HasSubstr;

constexpr char kTree[] = "{type: static, choices: [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}";

// Rank r of node's children: the r-th best logit after the node's path.
int32_t RankedToken(const TableDrafter& drafter, const std::vector<int32_t>& path, int rank) {
  return static_cast<int32_t>(std::get<1>(drafter.Logits(path).topk(rank + 1)).index({rank}).item<int64_t>());
}

TEST(StaticTreeBuilderTest, DraftsTopKPerNodeWithOneForwardPerLevel) {
  auto builder = BuilderFromYaml(kTree);
  ASSERT_TRUE(builder.ok()) << builder.status();
  EXPECT_FALSE((*builder)->traits().samples_tokens);
  TableDrafter drafter(16, 5);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok()) << draft.status();
  const TokenTree& tree = draft->tree;
  ASSERT_EQ(tree.size(), 8);
  EXPECT_EQ(draft->sampling, DraftSampling::kDeterministic);
  EXPECT_FALSE(draft->draft_probs.defined());
  EXPECT_EQ(tree.max_depth(), 3);
  // Topological, siblings in rank order, and the ranked tokens of each node's own path.
  const std::vector<int> expected_parent{-1, 0, 0, 0, 1, 1, 2, 4};
  for (int i = 0; i < tree.size(); ++i) EXPECT_EQ(tree.parent(i), expected_parent[i]) << i;
  for (int parent = 0; parent < tree.size(); ++parent) {
    const auto& children = tree.children(parent);
    for (size_t r = 0; r < children.size(); ++r)
      EXPECT_EQ(HostTokens(*draft)[children[r]], RankedToken(drafter, PathTokens(*draft, parent), r));
  }
  // Levels 0, 1, 2 have children: three forwards, each listing the whole level's parents.
  ASSERT_EQ(drafter.calls().size(), 3u);
  EXPECT_EQ(drafter.calls()[0], std::vector<int>({0}));
  EXPECT_EQ(drafter.calls()[1], std::vector<int>({1, 2}));
  EXPECT_EQ(drafter.calls()[2], std::vector<int>({4}));
}

TEST(StaticTreeBuilderTest, SamplingDrawsSiblingsWithoutReplacementAndHandsTheParentRow) {
  auto builder = BuilderFromYaml("{type: static, sampling: true, choices: [[0], [1], [2], [0, 0], [0, 1]]}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  EXPECT_TRUE((*builder)->traits().samples_tokens);
  TableDrafter drafter(8, 2, /*scale=*/1.0);
  std::set<std::vector<int32_t>> first_levels;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    auto draft = BuildOnce(**builder, drafter, {.seed = seed});
    ASSERT_TRUE(draft.ok()) << draft.status();
    EXPECT_EQ(draft->sampling, DraftSampling::kWithoutReplacement);
    ASSERT_EQ(draft->tree.size(), 6);
    const std::vector<int32_t> tokens = HostTokens(*draft);
    first_levels.insert({tokens[1], tokens[2], tokens[3]});
    EXPECT_EQ(std::set<int32_t>({tokens[1], tokens[2], tokens[3]}).size(), 3u) << "siblings repeat a token";
    EXPECT_NE(tokens[4], tokens[5]);
    // draft_probs row i = softmax of the parent's logits (temperature 1), unmasked.
    ASSERT_TRUE(draft->draft_probs.defined());
    EXPECT_EQ(draft->draft_probs.size(0), 6);
    EXPECT_EQ(draft->draft_probs[0].sum().item<double>(), 0.0);
    for (int i = 1; i < 6; ++i) {
      at::Tensor q = drafter.Logits(PathTokens(*draft, draft->tree.parent(i))).softmax(-1);
      EXPECT_TRUE(at::equal(draft->draft_probs[i], q)) << i;  // the same softmax of the same logits
    }
  }
  EXPECT_GT(first_levels.size(), 5u) << "the draws should vary with the seed";
}

TEST(StaticTreeBuilderTest, SamplingDropsDrawsPastTheSupportOfQ) {
  auto builder = BuilderFromYaml("{type: static, sampling: true, choices: [[0], [1], [2], [1, 0], [2, 0]]}");
  ASSERT_TRUE(builder.ok());
  TableDrafter drafter(8, 3);
  // top_k = 2 leaves two tokens in q: the rank-2 draw (and its child) does not exist.
  auto draft = BuildOnce(**builder, drafter, {.sampling = {.temperature = 1.0, .top_k = 2}});
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(draft->tree.size(), 4);  // root, [0], [1], [1, 0]
  EXPECT_EQ(draft->tree.children(0).size(), 2u);
  EXPECT_EQ(draft->draft_probs.size(0), 4);
}

TEST(StaticTreeBuilderTest, TemperatureZeroDraftsTopKEvenWithSampling) {
  auto builder = BuilderFromYaml("{type: static, sampling: true, choices: [[0], [1], [0, 0]]}");
  ASSERT_TRUE(builder.ok());
  TableDrafter drafter(16, 9);
  auto draft = BuildOnce(**builder, drafter, {.sampling = {.temperature = 0.0}});
  ASSERT_TRUE(draft.ok());
  EXPECT_EQ(draft->sampling, DraftSampling::kDeterministic);
  EXPECT_EQ(HostTokens(*draft)[2], RankedToken(drafter, {1}, 1));
}

TEST(StaticTreeBuilderTest, ChoicesFileLoadsTheShippedEagleTree) {
  auto builder = BuilderFromYaml(std::string("{type: static, choices_file: ") + SPECLAB_SOURCE_DIR +
                                 "/configs/trees/eagle_mc_sim_7b_63.yaml}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  TableDrafter drafter(16, 1);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok());
  EXPECT_EQ(draft->tree.size(), 26);
  EXPECT_EQ(draft->tree.max_depth(), 5);
  EXPECT_EQ(drafter.calls().size(), 5u);  // depths 0..4 have children
}

TEST(StaticTreeBuilderTest, OptionErrorsNameFileLineAndKey) {
  auto missing_parent = BuilderFromYaml("type: static\nchoices: [[0], [1, 1]]\n", "trees.yaml");
  ASSERT_FALSE(missing_parent.ok());
  EXPECT_THAT(missing_parent.status().message(), HasSubstr("trees.yaml:2: key 'choices'"));
  EXPECT_THAT(missing_parent.status().message(), HasSubstr("[1, 1] (entry 1) has no parent path [1]"));

  auto gap = BuilderFromYaml("type: static\nsampling: true\nchoices: [[0], [2]]\n", "trees.yaml");
  EXPECT_THAT(gap.status().message(), HasSubstr("trees.yaml:3: key 'choices'"));
  EXPECT_THAT(gap.status().message(), HasSubstr("skip a rank"));
  EXPECT_TRUE(BuilderFromYaml("{type: static, choices: [[0], [2]]}").ok()) << "top-k may skip ranks";

  EXPECT_THAT(BuilderFromYaml("{type: static}", "t.yaml").status().message(),
              HasSubstr("give exactly one of 'choices'"));
  EXPECT_THAT(BuilderFromYaml("{type: static, choices: [[0]], choices_file: x.yaml}", "t.yaml").status().message(),
              HasSubstr("t.yaml:1: key 'choices_file'"));
  EXPECT_THAT(BuilderFromYaml("{type: static, choices_file: /nonexistent/tree.yaml}", "t.yaml").status().message(),
              HasSubstr("key 'choices_file'"));
  EXPECT_THAT(BuilderFromYaml("{type: static, choices: [[0]], width: 3}", "t.yaml").status().message(),
              HasSubstr("unknown key 'width'"));
  EXPECT_THAT(BuilderFromYaml("{type: static, choices: [0, 1]}", "t.yaml").status().message(),
              HasSubstr("t.yaml:1: key 'choices'"));
}

TEST(StaticTreeBuilderTest, RankBeyondTheVocabularyFailsAtBuild) {
  auto builder = BuilderFromYaml("{type: static, choices: [[0], [9]]}");
  ASSERT_TRUE(builder.ok());
  TableDrafter drafter(8, 1);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_FALSE(draft.ok());
  EXPECT_THAT(draft.status().message(), HasSubstr("exceeds the drafter's vocabulary"));
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
