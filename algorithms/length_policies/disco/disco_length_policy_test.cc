// The disco policy: its stop on a classifier's score, its device form against
// it, and in the engine (step by step, and pipelined with chains cut on the
// device) greedy's tokens at T = 0 and the target's law at T = 1 while its
// lengths follow a random classifier.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "algorithms/length_policies/common/acceptance_head.h"
#include "algorithms/length_policies/common/acceptance_head_testing.h"
#include "framework/core/length_policy.h"
#include "tests/support/length_policy_checks.h"

namespace speclab {
namespace {

using ::speclab::acceptance_head::AcceptanceHead;
using ::speclab::acceptance_head::testing::ConstantHead;
using ::speclab::acceptance_head::Features;
using ::speclab::acceptance_head::NewHead;
using ::speclab::acceptance_head::testing::IndexedTopProbabilityHead;
using ::speclab::acceptance_head::testing::TopProbabilityHead;
using ::speclab::acceptance_head::testing::WriteHead;
using ::speclab::testing::LengthPolicyError;
using ::speclab::testing::MakeLengthPolicy;
using ::speclab::testing::PolicyForm;
using ::testing::HasSubstr;

std::string Yaml(const std::string& head, double threshold, int max) {
  return "{type: disco, head: " + head + ", threshold: " + std::to_string(threshold) + ", max: " +
         std::to_string(max) + "}";
}

// A classifier that scores a draft above 1/2 where the drafter's top
// probability is above `top` (the confidence tests' thresholds move the tiny
// drafters' lengths).
std::string TopHead(int64_t vocab, double top) {
  return WriteHead(TopProbabilityHead(vocab, top), "disco_top_" + std::to_string(vocab) + "_" + std::to_string(top));
}

TEST(DiscoTest, ScoresTheDrafterTopProbabilitiesAndEntropy) {
  // score = sigmoid(w . [p_1..p_10, H]): w = +4 on the top probability only.
  AcceptanceHead head = NewHead(Features::kSummary, 4, /*hidden=*/1, /*seed=*/1, /*prior_logit=*/-2.0);
  head.w1.zero_();
  head.w1[0][0] = 4.0;
  head.b1.zero_();
  head.w2.fill_(1.0);
  auto policy = MakeLengthPolicy(Yaml(WriteHead(head, "disco_scripted"), 0.5, 5));
  ASSERT_TRUE(policy.ok()) << policy.status();
  DraftLengthPolicy& p = **policy;
  EXPECT_EQ(p.draft_row(), DraftRow::kLogProbs);
  EXPECT_EQ(p.MaxDraftLength(), 5);
  // silu(4 p1) - 2 crosses 0 near p1 = 0.55: a peaked row goes on, a flat one stops.
  const std::vector<float> peaked = {-0.05f, -4.0f, -5.0f, -6.0f};
  const std::vector<float> flat = {-1.3863f, -1.3863f, -1.3863f, -1.3863f};
  EXPECT_TRUE(p.ContinueDrafting({.depth = 1, .log_probs = peaked}));
  EXPECT_FALSE(p.ContinueDrafting({.depth = 2, .log_probs = flat}));
}

// DISCO's features: the summary and the draft's index, stricter by 0.1 a draft.
std::string IndexedHead(int64_t vocab, double top) {
  return WriteHead(IndexedTopProbabilityHead(vocab, top, /*per_draft=*/0.1),
                   "disco_indexed_" + std::to_string(vocab) + "_" + std::to_string(top));
}

TEST(DiscoTest, ReadsTheDraftsIndex) {
  auto policy = MakeLengthPolicy(Yaml(IndexedHead(4, 0.3), 0.5, 8));
  ASSERT_TRUE(policy.ok()) << policy.status();
  // Top probability 0.55: above 0.3 + 0.1 (d - 1) up to the third draft.
  const std::vector<float> row = {std::log(0.55f), std::log(0.15f), std::log(0.15f), std::log(0.15f)};
  for (int depth = 1; depth <= 6; ++depth)
    EXPECT_EQ((*policy)->ContinueDrafting({.depth = depth, .log_probs = row}), depth <= 3) << "depth " << depth;
}

TEST(DiscoTest, DeviceFormKeepsTheHostRulesDrafts) {
  testing::ExpectDeviceStopKeepsTheHostRulesDrafts(Yaml(TopHead(16, 0.4), 0.5, 6));
  testing::ExpectDeviceStopKeepsTheHostRulesDrafts(Yaml(IndexedHead(16, 0.3), 0.5, 6));
}

TEST(DiscoTest, EqualsGreedyWithLengthsFollowingTheClassifier) {
  testing::ExpectGreedyWithAMovingLength(Yaml(TopHead(16, 0.2), 0.5, 6), "disco", /*drafter_seed=*/2,
                                         /*drafter_logit_scale=*/10);
  testing::ExpectGreedyWithAMovingLength(Yaml(TopHead(16, 0.2), 0.5, 6), "disco", /*drafter_seed=*/2,
                                         /*drafter_logit_scale=*/10, PolicyForm::kDevice);
}

TEST(DiscoTest, KeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy(Yaml(TopHead(8, 0.5), 0.5, 3), "disco");
  testing::ExpectChainLawWithPolicy(Yaml(IndexedHead(8, 0.45), 0.5, 3), "disco", PolicyForm::kDevice);
}

TEST(DiscoTest, ErrorsNameTheKeyAndTheFile) {
  EXPECT_THAT(LengthPolicyError("{type: disco}"), HasSubstr("head"));
  const std::string head = TopHead(16, 0.5);
  EXPECT_THAT(LengthPolicyError(Yaml(head, -0.1, 4)), HasSubstr("threshold"));
  EXPECT_THAT(LengthPolicyError(Yaml(head, 0.5, 65)), HasSubstr("max"));
  const std::string specdec = WriteHead(ConstantHead(Features::kLogProbs, 16, 0.5), "specdec_for_disco");
  EXPECT_THAT(LengthPolicyError(Yaml(specdec, 0.5, 4)), HasSubstr("'log_probs' features"));
}

}  // namespace
}  // namespace speclab
