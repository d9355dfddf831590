// The svip policy: its decision on the drafter's entropy, its device form
// against it, and in the engine (step by step, and pipelined with chains cut
// on the device) greedy's tokens at T = 0 and the target's law at T = 1
// while its lengths move with the drafter's entropy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "framework/core/length_policy.h"
#include "tests/support/length_policy_checks.h"

namespace speclab {
namespace {

using ::speclab::testing::LengthPolicyError;
using ::speclab::testing::MakeLengthPolicy;
using ::speclab::testing::PolicyForm;
using ::testing::HasSubstr;

TEST(SvipLengthPolicyTest, StopsOnceTheScaledEntropyPassesTheThreshold) {
  auto policy = MakeLengthPolicy("{type: svip}");  // the authors' defaults
  ASSERT_TRUE(policy.ok()) << policy.status();
  DraftLengthPolicy& p = **policy;
  EXPECT_TRUE(p.wants_progress());
  EXPECT_EQ(p.draft_row(), DraftRow::kNone);
  EXPECT_EQ(p.MaxDraftLength(), 40);
  // sqrt(0.15 H) = 0.3 at H = 0.6: below goes on, above stops.
  EXPECT_TRUE(p.ContinueDrafting({.depth = 1, .draft_entropy = 0.59}));
  EXPECT_FALSE(p.ContinueDrafting({.depth = 2, .draft_entropy = 0.61}));
  EXPECT_TRUE(p.ContinueDrafting({.depth = 3, .draft_entropy = 0.0}));
}

TEST(SvipLengthPolicyTest, DeviceFormKeepsTheHostRulesDrafts) {
  testing::ExpectDeviceStopKeepsTheHostRulesDrafts("{type: svip, gamma: 0.15, threshold: 0.6, max: 6}");
}

TEST(SvipLengthPolicyTest, DeviceFormDecidesAsTheHostRuleAroundItsBound) {
  for (const char* yaml : {"{type: svip, gamma: 0.15, threshold: 0.6, max: 6}",
                           "{type: svip, gamma: 0.3, threshold: 0.1, max: 6}"})
    testing::ExpectDeviceStopDecidesAsTheHostRuleOnFact(yaml, testing::DraftFact::kEntropy);
}

// sqrt(0.2 H) > 0.7 is the entropy tests' threshold (1 - 0.3) under SVIP's form.
TEST(SvipLengthPolicyTest, EqualsGreedyWithLengthsFollowingTheDrafter) {
  testing::ExpectGreedyWithAMovingLength("{type: svip, gamma: 0.2, threshold: 0.7, max: 6}", "svip",
                                         /*drafter_seed=*/2, /*drafter_logit_scale=*/10);
  testing::ExpectGreedyWithAMovingLength("{type: svip, gamma: 0.2, threshold: 0.7, max: 6}", "svip",
                                         /*drafter_seed=*/2, /*drafter_logit_scale=*/10, PolicyForm::kDevice);
}

TEST(SvipLengthPolicyTest, KeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy("{type: svip, gamma: 0.2, threshold: 0.55, max: 3}", "svip");
  testing::ExpectChainLawWithPolicy("{type: svip, gamma: 0.2, threshold: 0.45, max: 3}", "svip",
                                    PolicyForm::kDevice);
}

TEST(SvipLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(LengthPolicyError("{type: svip, gamma: 0}"), HasSubstr("gamma"));
  EXPECT_THAT(LengthPolicyError("{type: svip, threshold: -1}"), HasSubstr("threshold"));
  EXPECT_THAT(LengthPolicyError("{type: svip, max: 65}"), HasSubstr("max"));
  EXPECT_THAT(LengthPolicyError("{type: svip, gamma_e: 0.2}"), HasSubstr("gamma_e"));
}

}  // namespace
}  // namespace speclab
