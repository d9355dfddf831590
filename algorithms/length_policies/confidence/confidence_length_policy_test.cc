// The confidence policy: its decision on the drafter's top probability, and
// in the engine greedy's tokens at T = 0 and the target's law at T = 1 while
// its lengths move with the drafter's confidence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "framework/core/length_policy.h"
#include "tests/support/length_policy_checks.h"

namespace speclab {
namespace {

using ::speclab::testing::LengthPolicyError;
using ::speclab::testing::MakeLengthPolicy;

using ::testing::HasSubstr;

TEST(ConfidenceLengthPolicyTest, StopsOnceTheTopProbabilityFallsBelowTheThreshold) {
  auto policy = MakeLengthPolicy("{type: confidence, threshold: 0.4, max: 6}");
  ASSERT_TRUE(policy.ok()) << policy.status();
  DraftLengthPolicy& p = **policy;
  EXPECT_TRUE(p.wants_progress());
  EXPECT_FALSE(p.length_is_fixed());
  EXPECT_EQ(p.MaxDraftLength(), 6);
  EXPECT_TRUE(p.ContinueDrafting({.depth = 1, .draft_probability = 0.1, .top_probability = 0.4}));
  // The drafted token's own q does not matter (at T = 0 it is 1), the drafter's confidence does.
  EXPECT_FALSE(p.ContinueDrafting({.depth = 2, .draft_probability = 1.0, .top_probability = 0.39}));
}

TEST(ConfidenceLengthPolicyTest, EqualsGreedyWithLengthsFollowingTheDrafter) {
  // A flat drafter (logit scale 10: top probabilities about 0.15-0.4) whose confidence crosses 0.2.
  testing::ExpectGreedyWithAMovingLength("{type: confidence, threshold: 0.2, max: 6}", "confidence",
                                         /*drafter_seed=*/2, /*drafter_logit_scale=*/10);
}

TEST(ConfidenceLengthPolicyTest, KeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy("{type: confidence, threshold: 0.5, max: 3}", "confidence");
}

TEST(ConfidenceLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(LengthPolicyError("{type: confidence, threshold: 1.5}"), HasSubstr("threshold"));
  EXPECT_THAT(LengthPolicyError("{type: confidence, max: 0}"), HasSubstr("max"));
  EXPECT_THAT(LengthPolicyError("{type: confidence, level: 0.5}"), HasSubstr("level"));
}

}  // namespace
}  // namespace speclab
