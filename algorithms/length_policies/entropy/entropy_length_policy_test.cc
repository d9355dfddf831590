// The entropy (AdaEDL) policy: its decision on the drafter's entropy, its
// device form against it, and in the engine (step by step, and pipelined
// with chains cut on the device) greedy's tokens at T = 0 and the target's
// law at T = 1 while its lengths move with the drafter's entropy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "framework/core/length_policy.h"
#include "tests/support/length_policy_checks.h"

namespace speclab {
namespace {

using ::speclab::testing::LengthPolicyError;
using ::speclab::testing::MakeLengthPolicy;
using ::speclab::testing::PolicyForm;
using ::testing::HasSubstr;

TEST(EntropyLengthPolicyTest, StopsOnceTheAcceptanceEstimateFallsBelowTheThreshold) {
  auto policy = MakeLengthPolicy("{type: entropy, gamma_e: 0.2, threshold: 0.4, max: 6}");
  ASSERT_TRUE(policy.ok()) << policy.status();
  DraftLengthPolicy& p = **policy;
  EXPECT_TRUE(p.wants_progress());
  EXPECT_EQ(p.MaxDraftLength(), 6);
  // 1 - sqrt(0.2 H) = 0.4 at H = 1.8: below goes on, above stops.
  EXPECT_TRUE(p.ContinueDrafting({.depth = 1, .draft_entropy = 1.79}));
  EXPECT_FALSE(p.ContinueDrafting({.depth = 2, .draft_entropy = 1.81}));
  EXPECT_TRUE(p.ContinueDrafting({.depth = 3, .draft_entropy = 0.0}));  // a certain drafter never stops
}

TEST(EntropyLengthPolicyTest, EqualsGreedyWithLengthsFollowingTheDrafter) {
  testing::ExpectGreedyWithAMovingLength("{type: entropy, threshold: 0.3, max: 6}", "entropy", /*drafter_seed=*/2,
                                         /*drafter_logit_scale=*/10);
}

TEST(EntropyLengthPolicyTest, KeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy("{type: entropy, threshold: 0.45, max: 3}", "entropy");
}

TEST(EntropyLengthPolicyTest, DeviceFormKeepsTheHostRulesDrafts) {
  testing::ExpectDeviceStopKeepsTheHostRulesDrafts("{type: entropy, gamma_e: 0.2, threshold: 0.4, max: 6}");
}

// One float comparison against the rule's first stopping entropy, where the
// host rule takes five float64 operations.
TEST(EntropyLengthPolicyTest, DeviceFormDecidesAsTheHostRuleAroundItsBound) {
  for (const char* yaml : {"{type: entropy, gamma_e: 0.2, threshold: 0.4, max: 6}",
                           "{type: entropy, gamma_e: 0.3, threshold: 0.7, max: 6}",
                           "{type: entropy, gamma_e: 1.7, threshold: 0.05, max: 6}"})
    testing::ExpectDeviceStopDecidesAsTheHostRuleOnFact(yaml, testing::DraftFact::kEntropy);
}

TEST(EntropyLengthPolicyTest, PipelinedWithItsDeviceFormEqualsGreedy) {
  testing::ExpectGreedyWithAMovingLength("{type: entropy, threshold: 0.3, max: 6}", "entropy", /*drafter_seed=*/2,
                                         /*drafter_logit_scale=*/10, PolicyForm::kDevice);
}

TEST(EntropyLengthPolicyTest, PipelinedWithItsDeviceFormKeepsTheTargetLaw) {
  // A threshold this drafter's first token misses: every chain cut after 1 of 3.
  testing::ExpectChainLawWithPolicy("{type: entropy, threshold: 0.55, max: 3}", "entropy", PolicyForm::kDevice);
}

TEST(EntropyLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(LengthPolicyError("{type: entropy, gamma_e: 0}"), HasSubstr("gamma_e"));
  EXPECT_THAT(LengthPolicyError("{type: entropy, threshold: 1.5}"), HasSubstr("threshold"));
  EXPECT_THAT(LengthPolicyError("{type: entropy, max: 0}"), HasSubstr("max"));
  EXPECT_THAT(LengthPolicyError("{type: entropy, lambda: 0.5}"), HasSubstr("lambda"));
}

}  // namespace
}  // namespace speclab
