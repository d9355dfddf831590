// The confidence policy: its decision on the drafter's top probability, and
// in the engine greedy's tokens at T = 0 and the target's law at T = 1 while
// its lengths move with the drafter's confidence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>

#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/method.h"
#include "framework/speculative_decoder.h"
#include "tests/support/length_policy_checks.h"
#include "tests/support/tiny_models.h"

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

// The device form: the host rule's lengths, and in pipelined chains cut on
// the device, greedy's tokens and the target's law.
TEST(ConfidenceLengthPolicyTest, DeviceFormKeepsTheHostRulesDrafts) {
  testing::ExpectDeviceStopKeepsTheHostRulesDrafts("{type: confidence, threshold: 0.4, max: 6}");
}

// Around the threshold's own float: the device form compares in float32
// against the smallest float at or above the threshold, the host rule in
// double; 0.7 rounds down to float (a comparison with the rounded threshold
// would keep drafting there), 0.4 up, 0.5 not at all. And on a NaN top
// probability (NaN logits), where both go on.
TEST(ConfidenceLengthPolicyTest, DeviceFormDecidesAsTheHostRuleAtTheThresholdsFloats) {
  for (const double threshold : {0.7, 0.4, 0.5}) {
    const std::string yaml = "{type: confidence, threshold: " + std::to_string(threshold) + ", max: 3}";
    testing::ExpectDeviceStopDecidesAsTheHostRuleOnFact(yaml, testing::DraftFact::kTopProbability);
    auto host = MakeLengthPolicy(yaml);
    ASSERT_TRUE(host.ok()) << host.status();
    EXPECT_TRUE((*host)->ContinueDrafting({.depth = 1, .top_probability = std::numeric_limits<double>::quiet_NaN()}))
        << "a NaN top probability goes on";
  }
}

TEST(ConfidenceLengthPolicyTest, PipelinedWithItsDeviceFormEqualsGreedy) {
  testing::ExpectGreedyWithAMovingLength("{type: confidence, threshold: 0.2, max: 6}", "confidence",
                                         /*drafter_seed=*/2, /*drafter_logit_scale=*/10, testing::PolicyForm::kDevice);
}

TEST(ConfidenceLengthPolicyTest, PipelinedWithItsDeviceFormKeepsTheTargetLaw) {
  // A threshold this drafter's first token misses: every chain cut after 1 of
  // 3 drafts, so that the verdict is cut wherever it accepted that draft.
  testing::ExpectChainLawWithPolicy("{type: confidence, threshold: 0.55, max: 3}", "confidence",
                                    testing::PolicyForm::kDevice);
}

// Block verification weighs a chain's drafts together: a chain drafted past
// the stop cannot be cut after it, so the method steps on the host, saying why.
TEST(ConfidenceLengthPolicyTest, WithBlockVerificationItStepsOnTheHost) {
  auto target = testing::TinyModel(1);
  Method method = testing::ModelDrafterMethod(testing::TinyModel(2), "{type: chain}", "{type: block}", 1);
  const std::string yaml = "{type: confidence, threshold: 0.4, max: 4}";
  auto policy = MakeLengthPolicy(yaml);
  ASSERT_TRUE(policy.ok()) << policy.status();
  method.policy = *std::move(policy);
  method.policy_name = "confidence";
  auto options = Options::FromString(yaml, "policy.yaml");
  ASSERT_TRUE(options.ok());
  ASSERT_TRUE(AttachDeviceStop(method, *options).ok());
  ASSERT_NE(method.device_stop, nullptr);
  auto out = GenerateSpeculative(*target, method, {1, 5, 3, 7, 2}, {.sampling = {.temperature = 1}, .max_new_tokens = 8});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->engine_form, HasSubstr("the verifier 'block' weighs a chain's drafts together"));
}

TEST(ConfidenceLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(LengthPolicyError("{type: confidence, threshold: 1.5}"), HasSubstr("threshold"));
  EXPECT_THAT(LengthPolicyError("{type: confidence, max: 0}"), HasSubstr("max"));
  EXPECT_THAT(LengthPolicyError("{type: confidence, level: 0.5}"), HasSubstr("level"));
}

}  // namespace
}  // namespace speclab
