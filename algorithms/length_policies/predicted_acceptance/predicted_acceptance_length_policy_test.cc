// The predicted_acceptance (SpecDec++) policy: its stop on a head's
// predicted acceptances, its device form against it, and in the engine (step
// by step, and pipelined with chains cut on the device) greedy's tokens at T
// = 0 and the target's law at T = 1 while its lengths follow a random head.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "algorithms/length_policies/common/acceptance_head.h"
#include "algorithms/length_policies/common/acceptance_head_testing.h"
#include "framework/core/length_policy.h"
#include "tests/support/length_policy_checks.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using ::speclab::acceptance_head::testing::ConstantHead;
using ::speclab::acceptance_head::Features;
using ::speclab::acceptance_head::testing::MeanLogProbHead;
using ::speclab::acceptance_head::testing::ProjectionHead;
using ::speclab::acceptance_head::testing::WriteHead;
using ::speclab::testing::LengthPolicyError;
using ::speclab::testing::MakeLengthPolicy;
using ::speclab::testing::PolicyForm;
using ::testing::HasSubstr;

std::string Yaml(const std::string& head, double threshold, int max) {
  return "{type: predicted_acceptance, head: " + head + ", threshold: " + std::to_string(threshold) +
         ", max: " + std::to_string(max) + "}";
}

// A head that predicts acceptance where the drafter's row is flat (mean
// log-probability above -offset): the tiny drafters' lengths then move.
std::string FlatRowHead(int64_t vocab, double offset) {
  return WriteHead(MeanLogProbHead(vocab, offset), "flat_" + std::to_string(vocab) + "_" + std::to_string(offset));
}

TEST(PredictedAcceptanceTest, StopsOnceThePredictedChanceOfARejectionExceedsTheThreshold) {
  // a = 0.8 at every draft: 1 - 0.8^k is .2, .36, .488: past .4 at the third.
  const std::string head = WriteHead(ConstantHead(Features::kLogProbs, 4, 0.8), "constant");
  auto policy = MakeLengthPolicy(Yaml(head, 0.4, 6));
  ASSERT_TRUE(policy.ok()) << policy.status();
  DraftLengthPolicy& p = **policy;
  EXPECT_TRUE(p.wants_progress());
  EXPECT_EQ(p.draft_row(), DraftRow::kLogProbs);
  EXPECT_EQ(p.draft_row_width(), 4);
  EXPECT_EQ(p.MaxDraftLength(), 6);
  const std::vector<float> row = {-0.1f, -3.0f, -4.0f, -5.0f};
  for (int step = 0; step < 2; ++step) {  // the product restarts each step
    EXPECT_TRUE(p.ContinueDrafting({.depth = 1, .log_probs = row}));
    EXPECT_TRUE(p.ContinueDrafting({.depth = 2, .log_probs = row}));
    EXPECT_FALSE(p.ContinueDrafting({.depth = 3, .log_probs = row}));
  }
}

// A head on the tiny drafters' hidden states (32 wide), SpecDec++'s input.
std::string HiddenHead(double offset, uint64_t seed = 5) {
  return WriteHead(ProjectionHead(32, offset, seed),
                   "projection_" + std::to_string(offset) + "_" + std::to_string(seed));
}

TEST(PredictedAcceptanceTest, AHiddenHeadReadsTheDraftersHiddenState) {
  const acceptance_head::AcceptanceHead head = ProjectionHead(32, 0.5, 5);
  auto policy = MakeLengthPolicy(Yaml(WriteHead(head, "hidden_scripted"), 0.5, 6));
  ASSERT_TRUE(policy.ok()) << policy.status();
  DraftLengthPolicy& p = **policy;
  EXPECT_EQ(p.draft_row(), DraftRow::kHidden);
  EXPECT_EQ(p.draft_row_width(), 32);
  // The head's direction, and a state along it and one against it: the first
  // predicts acceptance near 1, the second sigmoid(4 silu(-3.5)) = 0.40.
  const at::Tensor u = head.w1.select(1, 0);
  const at::Tensor along = (u * (3 / u.pow(2).sum())).to(at::kFloat).contiguous();
  const at::Tensor against = (-along * 4.0 / 3.0).contiguous();
  auto span = [](const at::Tensor& t) { return absl::MakeConstSpan(t.data_ptr<float>(), t.numel()); };
  const std::vector<float> row = {-0.1f, -3.0f};  // log-probabilities the policy must not read
  for (int step = 0; step < 2; ++step) {
    EXPECT_TRUE(p.ContinueDrafting({.depth = 1, .log_probs = row, .hidden = span(along)}));
    EXPECT_TRUE(p.ContinueDrafting({.depth = 2, .hidden = span(along)}));
    EXPECT_FALSE(p.ContinueDrafting({.depth = 3, .hidden = span(against)}));  // 1 - 0.40 > 0.5
  }
}

TEST(PredictedAcceptanceTest, DeviceFormWithAHiddenHeadKeepsTheHostRulesDrafts) {
  testing::ExpectDeviceStopKeepsTheHostRulesDrafts(Yaml(HiddenHead(0.5), 0.5, 6));
}

TEST(PredictedAcceptanceTest, EqualsGreedyWithLengthsFollowingAHiddenHead) {
  testing::ExpectGreedyWithAMovingLength(Yaml(HiddenHead(0.5), 0.5, 6), "predicted_acceptance", /*drafter_seed=*/2,
                                         /*drafter_logit_scale=*/10);
}

TEST(PredictedAcceptanceTest, PipelinedWithAHiddenHeadEqualsGreedy) {
  testing::ExpectGreedyWithAMovingLength(Yaml(HiddenHead(0.5), 0.5, 6), "predicted_acceptance", /*drafter_seed=*/2,
                                         /*drafter_logit_scale=*/10, PolicyForm::kDevice);
}

TEST(PredictedAcceptanceTest, WithAHiddenHeadKeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy(Yaml(HiddenHead(0.5), 0.5, 3), "predicted_acceptance");
  testing::ExpectChainLawWithPolicy(Yaml(HiddenHead(0.5), 0.5, 3), "predicted_acceptance", PolicyForm::kDevice);
}

TEST(PredictedAcceptanceTest, RefusesADrafterOfAnotherHiddenWidth) {
  Method method = testing::ModelDrafterMethod(testing::TinyModel(2, 16, 2, 30, 256, /*hidden=*/48), "{type: chain}",
                                              "{type: greedy}", 1);
  auto policy = MakeLengthPolicy(Yaml(HiddenHead(0.5), 0.5, 4));
  ASSERT_TRUE(policy.ok()) << policy.status();
  method.policy = *std::move(policy);
  method.policy_name = "predicted_acceptance";
  const absl::Status status = method.CheckCompatible();
  EXPECT_THAT(status.message(), HasSubstr("reads hidden states of width 32"));
  EXPECT_THAT(status.message(), HasSubstr("has hidden states of width 48"));
}

// Drafters that give no hidden states are refused when the method is
// loaded, by name: a token-only drafter, and one of logits whose rows come
// from no hidden state of its own (Medusa's heads read the target's).
TEST(PredictedAcceptanceTest, RefusesDraftersWithoutHiddenStates) {
  auto target = testing::TinyModel(1);
  const std::string policy = Yaml(HiddenHead(0.5), 0.5, 4);
  auto token_only = testing::MethodFromYaml(
      "{name: m, drafter: {type: prompt_lookup}, verifier: {type: point_mass}, length_policy: " + policy + "}",
      target.get());
  EXPECT_THAT(token_only.status().message(),
              HasSubstr("reads the drafter's hidden states, but drafter 'prompt_lookup' gives tokens only"));
  auto heads = testing::MethodFromYaml(
      "{name: m, drafter: {type: medusa, heads: 2}, verifier: {type: rejection}, length_policy: " + policy + "}",
      target.get());
  EXPECT_THAT(heads.status().message(), HasSubstr("reads hidden states of width 32 (its head's input), but drafter "
                                                  "'medusa' gives none"));
}

TEST(PredictedAcceptanceTest, DeviceFormKeepsTheHostRulesDrafts) {
  testing::ExpectDeviceStopKeepsTheHostRulesDrafts(Yaml(FlatRowHead(16, 4), 0.5, 6));
}

TEST(PredictedAcceptanceTest, EqualsGreedyWithLengthsFollowingTheHead) {
  testing::ExpectGreedyWithAMovingLength(Yaml(FlatRowHead(16, 4), 0.5, 6), "predicted_acceptance", /*drafter_seed=*/2,
                                         /*drafter_logit_scale=*/10);
}

TEST(PredictedAcceptanceTest, PipelinedWithItsDeviceFormEqualsGreedy) {
  testing::ExpectGreedyWithAMovingLength(Yaml(FlatRowHead(16, 4), 0.5, 6), "predicted_acceptance", /*drafter_seed=*/2,
                                         /*drafter_logit_scale=*/10, PolicyForm::kDevice);
}

TEST(PredictedAcceptanceTest, KeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy(Yaml(FlatRowHead(8, 3), 0.5, 3), "predicted_acceptance");
}

TEST(PredictedAcceptanceTest, PipelinedWithItsDeviceFormKeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy(Yaml(FlatRowHead(8, 3), 0.5, 3), "predicted_acceptance", PolicyForm::kDevice);
}

TEST(PredictedAcceptanceTest, ErrorsNameTheKeyAndTheFile) {
  const std::string head = FlatRowHead(16, 4);
  EXPECT_THAT(LengthPolicyError("{type: predicted_acceptance}"), HasSubstr("head"));
  EXPECT_THAT(LengthPolicyError(Yaml("/nonexistent/head.safetensors", 0.5, 4)),
              HasSubstr("/nonexistent/head.safetensors"));
  EXPECT_THAT(LengthPolicyError(Yaml(head, 1.5, 4)), HasSubstr("threshold"));
  EXPECT_THAT(LengthPolicyError(Yaml(head, 0.5, 0)), HasSubstr("max"));
  EXPECT_THAT(LengthPolicyError("{type: predicted_acceptance, head: " + head + ", h: 0.5}"), HasSubstr("h"));
  const std::string summary = WriteHead(ConstantHead(Features::kSummary, 16, 0.5), "summary_for_specdec");
  EXPECT_THAT(LengthPolicyError(Yaml(summary, 0.5, 4)), HasSubstr("'summary' features"));
  EXPECT_THAT(LengthPolicyError(Yaml(summary, 0.5, 4)), HasSubstr("'hidden' or 'log_probs'"));
}

TEST(PredictedAcceptanceTest, RefusesADrafterOfAnotherVocabulary) {
  Method method = testing::ModelDrafterMethod(testing::TinyModel(2, 16), "{type: chain}", "{type: greedy}", 1);
  auto policy = MakeLengthPolicy(Yaml(FlatRowHead(8, 3), 0.5, 4));
  ASSERT_TRUE(policy.ok()) << policy.status();
  method.policy = *std::move(policy);
  method.policy_name = "predicted_acceptance";
  const absl::Status status = method.CheckCompatible();
  EXPECT_THAT(status.message(), HasSubstr("log-probability rows of 8 tokens"));
  EXPECT_THAT(status.message(), HasSubstr("vocabulary of 16"));
}

}  // namespace
}  // namespace speclab
