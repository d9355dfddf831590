#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

VerificationProblem ArgmaxOnlyProblem(const TokenTree& tree, std::vector<int32_t> argmax) {
  VerificationProblem problem;
  problem.tree = &tree;
  problem.target_argmax = std::move(argmax);
  return problem;
}

TEST(GreedyVerifierTest, TraitsReadOnlyTheArgmax) {
  auto verifier = MakeVerifier("greedy");
  ASSERT_NE(verifier, nullptr);
  const VerifierTraits traits = verifier->traits();
  EXPECT_EQ(traits.losslessness, Losslessness::kLossless);
  EXPECT_FALSE(traits.needs_target_rows);
  EXPECT_FALSE(traits.needs_draft_distributions);
  EXPECT_FALSE(traits.chain_only);
  EXPECT_FALSE(CreateStatus("greedy", "{unknown_key: 1}").ok());
}

TEST(GreedyVerifierTest, KeepsTheLongestMatchingPathWithoutTargetRows) {
  // root(0) -> 1 -> 2 -> 3 and root -> 4 -> 5; argmax: root 4, node 4 says 5.
  TokenTree tree(0);
  const int a = tree.AddNode(0, 1);
  const int b = tree.AddNode(0, 4);
  tree.AddNode(a, 2);
  const int d = tree.AddNode(b, 5);
  SeededRandomSource random(1);
  auto verifier = MakeVerifier("greedy");
  ASSERT_NE(verifier, nullptr);
  auto verdict = verifier->Verify(ArgmaxOnlyProblem(tree, {4, 2, 5, 0, 7}), random);
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_EQ(verdict->accepted, (std::vector<int>{b, d}));
  EXPECT_EQ(verdict->extra_token, 7);
}

TEST(GreedyVerifierTest, TakesTheFirstPathOnTiesAndTheRootWhenNothingMatches) {
  TokenTree tree(0);
  const int a = tree.AddNode(0, 3);
  tree.AddNode(0, 3);
  SeededRandomSource random(1);
  auto verifier = MakeVerifier("greedy");
  ASSERT_NE(verifier, nullptr);
  auto tie = verifier->Verify(ArgmaxOnlyProblem(tree, {3, 1, 2}), random);
  ASSERT_TRUE(tie.ok());
  EXPECT_EQ(tie->accepted, (std::vector<int>{a}));
  EXPECT_EQ(tie->extra_token, 1);
  auto none = verifier->Verify(ArgmaxOnlyProblem(tree, {2, 1, 1}), random);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->accepted.empty());
  EXPECT_EQ(none->extra_token, 2);
  EXPECT_FALSE(verifier->Verify(ArgmaxOnlyProblem(tree, {2}), random).ok());  // argmax missing
}

TEST(GreedyVerifierTest, LosslessAtTemperatureZero) {
  auto verifier = MakeVerifier("greedy");
  ASSERT_NE(verifier, nullptr);
  std::vector<Instance> instances;
  for (DraftMode mode : {DraftMode::kTopK, DraftMode::kIndependent}) {
    for (Instance instance : Catalogue(mode, /*chains_only=*/false)) {
      instance.target.one_hot = true;  // greedy preserves the greedy law only
      instances.push_back(instance);
    }
  }
  ExpectLossless(*verifier, instances, "greedy (T=0)");
}

TEST(GreedyVerifierTest, IsNotTheSamplingLawAboveTemperatureZero) {
  auto verifier = MakeVerifier("greedy");
  ASSERT_NE(verifier, nullptr);
  EXPECT_GT(MaxLawError(*verifier, {MakeInstance({2, 1}, 4, DraftMode::kTopK, 11)}), kLossyThreshold);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
