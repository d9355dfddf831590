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

// Row i must be the warped q after node i's parent: the law node i was drawn from.
void ExpectParentRows(const DraftTree& draft, const TableDrafter& drafter, const SamplingParams& sampling) {
  ASSERT_TRUE(draft.draft_probs.defined());
  ASSERT_EQ(draft.draft_probs.size(0), draft.tree.size());
  for (int i = 1; i < draft.tree.size(); ++i) {
    at::Tensor q = Probabilities(drafter.Logits(draft.tree.PathTokens(draft.tree.parent(i))).unsqueeze(0), sampling)[0];
    EXPECT_TRUE(at::equal(draft.draft_probs[i], q)) << "node " << i;  // the same rows, not a recomputation
    EXPECT_GT(q[draft.tree.token(i)].item<double>(), 0.0) << "node " << i << " drawn outside q's support";
  }
}

TEST(MultiSampleTreeBuilderTest, DraftsKSequencesAsATrieWithOneForwardPerLevel) {
  auto builder = BuilderFromYaml("{type: multi_sample, k: 4}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  EXPECT_TRUE((*builder)->traits().samples_tokens);
  EXPECT_TRUE((*builder)->traits().may_branch);
  TableDrafter drafter(6, 3, /*scale=*/1.5);  // a small vocabulary makes repeated draws common
  bool saw_merge = false;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    auto draft = BuildOnce(**builder, drafter, {.gamma = 3, .seed = seed});
    ASSERT_TRUE(draft.ok()) << draft.status();
    EXPECT_EQ(draft->sampling, DraftSampling::kIndependent);
    const TokenTree& tree = draft->tree;
    EXPECT_EQ(tree.size(), 1 + 4 * 3);  // every draw is a node
    EXPECT_EQ(tree.max_depth(), 3);
    EXPECT_EQ(HostTokens(*draft), tree.tokens());
    EXPECT_EQ(tree.children(0).size(), 4u);
    for (int i = 1; i < tree.size(); ++i) EXPECT_LT(tree.parent(i), i);
    ExpectParentRows(*draft, drafter, {});
    EXPECT_EQ(drafter.calls().size(), 3u);
    // Each level lists the distinct nodes holding a sequence, once.
    for (const auto& call : drafter.calls()) EXPECT_EQ(std::set<int>(call.begin(), call.end()).size(), call.size());
    if (drafter.calls()[1].size() < 4) saw_merge = true;
  }
  EXPECT_TRUE(saw_merge) << "identical first tokens should share a node";
}

TEST(MultiSampleTreeBuilderTest, WithoutReplacementBranchesOnceThenChains) {
  auto builder = BuilderFromYaml("{type: multi_sample, k: 3, replacement: false}");
  ASSERT_TRUE(builder.ok());
  TableDrafter drafter(8, 5, 1.0);
  auto draft = BuildOnce(**builder, drafter, {.gamma = 3, .seed = 2});
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(draft->sampling, DraftSampling::kWithoutReplacement);
  const TokenTree& tree = draft->tree;
  ASSERT_EQ(tree.size(), 1 + 3 * 3);
  const auto& first = tree.children(0);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(std::set<int32_t>({tree.token(first[0]), tree.token(first[1]), tree.token(first[2])}).size(), 3u);
  for (int i = 4; i < tree.size(); ++i) EXPECT_EQ(tree.children(tree.parent(i)).size(), 1u);
  ExpectParentRows(*draft, drafter, {});

  // A top_k = 2 warp leaves two tokens: the third sequence has no draw.
  const SamplingParams top2{.temperature = 1.0, .top_k = 2};
  auto narrow = BuildOnce(**builder, drafter, {.sampling = top2, .gamma = 2, .seed = 2});
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ(narrow->tree.children(0).size(), 2u);
  EXPECT_EQ(narrow->tree.size(), 1 + 2 * 2);
  ExpectParentRows(*narrow, drafter, top2);
}

TEST(MultiSampleTreeBuilderTest, TemperatureZeroDraftsOneChain) {
  for (const char* yaml : {"{type: multi_sample, k: 4}", "{type: multi_sample, k: 4, replacement: false}"}) {
    auto builder = BuilderFromYaml(yaml);
    ASSERT_TRUE(builder.ok());
    TableDrafter drafter(16, 7);
    auto draft = BuildOnce(**builder, drafter, {.sampling = {.temperature = 0}, .gamma = 4});
    ASSERT_TRUE(draft.ok()) << draft.status();
    EXPECT_TRUE(draft->tree.IsChain()) << yaml;
    EXPECT_EQ(draft->tree.size(), 5) << yaml;
    // The greedy continuation of the drafter, with one-hot rows.
    for (int i = 1; i < 5; ++i)
      EXPECT_EQ(draft->tree.token(i), drafter.Logits(draft->tree.PathTokens(i - 1)).argmax().item<int64_t>());
    ExpectParentRows(*draft, drafter, {.temperature = 0});
  }
}

TEST(MultiSampleTreeBuilderTest, OneSequenceIsAChainBuilder) {
  auto builder = BuilderFromYaml("{type: multi_sample, k: 1}");
  ASSERT_TRUE(builder.ok());
  EXPECT_FALSE((*builder)->traits().may_branch);
}

TEST(MultiSampleTreeBuilderTest, OptionErrorsNameFileLineAndKey) {
  EXPECT_THAT(BuilderFromYaml("type: multi_sample\nk: 0\n", "m.yaml").status().message(),
              HasSubstr("m.yaml:2: key 'k'"));
  EXPECT_THAT(BuilderFromYaml("type: multi_sample\nreplacement: maybe\n", "m.yaml").status().message(),
              HasSubstr("m.yaml:2: key 'replacement': expected true or false"));
  EXPECT_THAT(BuilderFromYaml("{type: multi_sample, sequences: 3}", "m.yaml").status().message(),
              HasSubstr("unknown key 'sequences'"));
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
