// The cost_aware policy: its throughput model, its choices on scripted
// outcomes against a brute-force maximum of that model, option errors, and in
// the engine greedy's tokens at T = 0 and the target's law at T = 1 while its
// length moves with the acceptance it measures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "algorithms/length_policies/cost_aware/cost_aware_model.h"
#include "framework/core/latency_profile.h"
#include "framework/core/length_policy.h"
#include "tests/support/length_policy_checks.h"

namespace speclab {
namespace {

using ::speclab::testing::LengthPolicyError;
using ::speclab::testing::MakeLengthPolicy;
using ::testing::HasSubstr;

// The target costs 1 ms for a token and 0.1 ms more for each token after it;
// the drafter 0.2 ms a token.
const LatencyProfile kProfile{.budgets = {1, 9}, .target_ms = {1.0, 1.8}, .draft_ms = 0.2};
const std::string kProfileYaml = "latency_profile: {budgets: [1, 9], target_ms: [1.0, 1.8], draft_ms: 0.2}";

TEST(CostAwareModelTest, ExpectedTokensAndTheBestLength) {
  EXPECT_DOUBLE_EQ(cost_aware::ExpectedTokens(0.0, 5), 1.0);
  EXPECT_DOUBLE_EQ(cost_aware::ExpectedTokens(0.5, 2), 1.75);  // 1 + 0.5 + 0.25
  EXPECT_DOUBLE_EQ(cost_aware::ExpectedTokens(1.0, 4), 5.0);
  for (double alpha : {0.0, 0.3, 0.6, 0.8, 0.95, 1.0}) {
    const int best = cost_aware::BestLength(kProfile, alpha, 16);
    for (int gamma = 1; gamma <= 16; ++gamma)
      EXPECT_GE(cost_aware::TokensPerMs(kProfile, alpha, best), cost_aware::TokensPerMs(kProfile, alpha, gamma))
          << "alpha " << alpha << " gamma " << gamma;
  }
  // A drafter that accepts more drafts longer; one that costs more, shorter.
  EXPECT_LT(cost_aware::BestLength(kProfile, 0.3, 16), cost_aware::BestLength(kProfile, 0.9, 16));
  LatencyProfile dear = kProfile;
  dear.draft_ms = 1.0;
  EXPECT_LT(cost_aware::BestLength(dear, 0.9, 16), cost_aware::BestLength(kProfile, 0.9, 16));
}

TEST(CostAwareLengthPolicyTest, FollowsTheAcceptanceItMeasures) {
  auto policy = MakeLengthPolicy("{type: cost_aware, prior: 0.5, decay: 1, max: 16, " + kProfileYaml + "}");
  ASSERT_TRUE(policy.ok()) << policy.status();
  DraftLengthPolicy& p = **policy;
  EXPECT_FALSE(p.length_is_fixed());
  // Before any step: the prior, 1 accepted of 2 trials.
  EXPECT_EQ(p.MaxDraftLength(), cost_aware::BestLength(kProfile, 0.5, 16));
  // Ten fully accepted steps of 4: α̂ = (40 + 1) / (40 + 0 + 2).
  for (int i = 0; i < 10; ++i) p.Observe({.drafted = 4, .accepted = 4});
  EXPECT_EQ(p.MaxDraftLength(), cost_aware::BestLength(kProfile, 41.0 / 42.0, 16));
  // Then twenty steps rejecting the first draft: α̂ = 41 / (40 + 20 + 2).
  for (int i = 0; i < 20; ++i) p.Observe({.drafted = 4, .accepted = 0});
  EXPECT_EQ(p.MaxDraftLength(), cost_aware::BestLength(kProfile, 41.0 / 62.0, 16));
  EXPECT_LT(p.MaxDraftLength(), cost_aware::BestLength(kProfile, 41.0 / 42.0, 16));
}

TEST(CostAwareLengthPolicyTest, EqualsGreedyAndMovesItsLengthInTheEngine) {
  testing::ExpectGreedyWithAMovingLength("{type: cost_aware, prior: 0.2, max: 8, " + kProfileYaml + "}", "cost_aware",
                                         /*drafter_seed=*/1);
}

TEST(CostAwareLengthPolicyTest, KeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy("{type: cost_aware, prior: 0.2, max: 3, " + kProfileYaml + "}", "cost_aware");
}

TEST(CostAwareLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(LengthPolicyError("{type: cost_aware}"), HasSubstr("latency_profile"));
  EXPECT_THAT(LengthPolicyError("{type: cost_aware, max: 0, " + kProfileYaml + "}"), HasSubstr("max"));
  EXPECT_THAT(LengthPolicyError("{type: cost_aware, prior: 1, " + kProfileYaml + "}"), HasSubstr("prior"));
  EXPECT_THAT(LengthPolicyError("{type: cost_aware, decay: 0, " + kProfileYaml + "}"), HasSubstr("decay"));
  EXPECT_THAT(LengthPolicyError("{type: cost_aware, gamma: 4, " + kProfileYaml + "}"), HasSubstr("gamma"));
}

}  // namespace
}  // namespace speclab
