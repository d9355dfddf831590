// The heuristic schedule, step by step and in the engine: lossless (greedy
// equality at T = 0), its length moving with acceptance, and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "framework/core/length_policy.h"
#include "framework/method.h"
#include "framework/speculative_decoder.h"
#include "tests/support/length_policy_checks.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::speclab::testing::LengthPolicyError;
using ::speclab::testing::MakeLengthPolicy;

using ::testing::HasSubstr;

TEST(HeuristicLengthPolicyTest, GrowsByTwoAfterFullAcceptanceAndShrinksByOne) {
  auto policy = MakeLengthPolicy("{type: heuristic, initial: 3, max: 6}");
  ASSERT_TRUE(policy.ok()) << policy.status();
  DraftLengthPolicy& p = **policy;
  EXPECT_FALSE(p.length_is_fixed());
  EXPECT_EQ(p.MaxDraftLength(), 3);
  p.Observe({.drafted = 3, .accepted = 3});
  EXPECT_EQ(p.MaxDraftLength(), 5);
  p.Observe({.drafted = 5, .accepted = 5});
  EXPECT_EQ(p.MaxDraftLength(), 6);  // capped at max
  p.Observe({.drafted = 6, .accepted = 2});
  EXPECT_EQ(p.MaxDraftLength(), 5);
  for (int i = 0; i < 10; ++i) p.Observe({.drafted = 1, .accepted = 0});
  EXPECT_EQ(p.MaxDraftLength(), 1);  // never below one
  p.Reset();
  EXPECT_EQ(p.MaxDraftLength(), 1);  // HF's "heuristic": kept across prompts

  auto transient = MakeLengthPolicy("{type: heuristic, initial: 3, transient: true}");
  ASSERT_TRUE(transient.ok()) << transient.status();
  (*transient)->Observe({.drafted = 3, .accepted = 0});
  (*transient)->Reset();
  EXPECT_EQ((*transient)->MaxDraftLength(), 3);  // "heuristic_transient"
}

// The target's own weights drafting: at T = 0 every draft is accepted, so the length grows 2, 4, 6, ...
TEST(HeuristicLengthPolicyTest, EqualsGreedyAndMovesItsLengthInTheEngine) {
  testing::ExpectGreedyWithAMovingLength("{type: heuristic, initial: 2}", "heuristic", /*drafter_seed=*/1);
}

// Its length moves every step: pipelined chains and trees observe it one
// step late, and the run says so; a tree whose size follows the length
// (multi_sample's sequences) changes size from step to step and still equals
// greedy decoding.
TEST(HeuristicLengthPolicyTest, PipelinedChainsObserveItOneStepLate) {
  auto policy = MakeLengthPolicy("{type: heuristic, initial: 2, max: 9}");
  ASSERT_TRUE(policy.ok());
  EXPECT_TRUE((*policy)->may_observe_late());
  EXPECT_EQ((*policy)->MaxDraftLengthBound(), 9);
  auto target = testing::TinyModel(1);
  Method chain = testing::ModelDrafterMethod(testing::TinyModel(1), "{type: chain}", "{type: greedy}", 1);
  chain.policy = *std::move(policy);
  chain.policy_name = "heuristic";
  auto out = GenerateSpeculative(*target, chain, {1, 5, 3, 7, 2}, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->engine_form, "pipelined chain; the length policy 'heuristic' observes each step one step late");
  Method trees = testing::ModelDrafterMethod(testing::TinyModel(1), "{type: multi_sample, k: 2}", "{type: greedy}", 1);
  auto tree_policy = MakeLengthPolicy("{type: heuristic, initial: 2}");
  ASSERT_TRUE(tree_policy.ok());
  trees.policy = *std::move(tree_policy);
  trees.policy_name = "heuristic";
  const DecodeOptions greedy{.sampling = {.temperature = 0}, .max_new_tokens = 30};
  auto tree_out = GenerateSpeculative(*target, trees, {1, 5, 3, 7, 2}, greedy);
  ASSERT_TRUE(tree_out.ok()) << tree_out.status();
  EXPECT_EQ(tree_out->engine_form, "pipelined tree; the length policy 'heuristic' observes each step one step late");
  auto autoregressive = GenerateAutoregressive(*target, {1, 5, 3, 7, 2}, greedy);
  ASSERT_TRUE(autoregressive.ok());
  EXPECT_EQ(tree_out->tokens, autoregressive->tokens);
  std::set<int> sizes;
  for (const StepStats& step : tree_out->steps) sizes.insert(step.tree_nodes);
  EXPECT_GT(sizes.size(), 1u) << "the tree's size never moved";
}

// Pipelined trees whose size moves keep the target's law (T = 1, two
// sampled sequences, SpecInfer), as step by step.
TEST(HeuristicLengthPolicyTest, PipelinedTreesOfMovingSizeKeepTheTargetLaw) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3};
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const testing::TwoTokenLaw law = testing::ExactTwoTokenLaw(*target, prompt, 1.0);
  Method method = testing::ModelDrafterMethod(testing::TinyModel(7, 8, 1, 15), "{type: multi_sample, k: 2}",
                                              "{type: specinfer}", 1);
  auto policy = MakeLengthPolicy("{type: heuristic, initial: 2, max: 4}");
  ASSERT_TRUE(policy.ok());
  method.policy = *std::move(policy);
  method.policy_name = "heuristic";
  testing::ExpectTheLawPipelinedAndStepByStep(*target, method, prompt, law, 1500, "multi_sample k 2, heuristic");
}

TEST(HeuristicLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(LengthPolicyError("{type: heuristic, initial: 0}"), HasSubstr("initial"));
  EXPECT_THAT(LengthPolicyError("{type: heuristic, max: 65}"), HasSubstr("max"));
  EXPECT_THAT(LengthPolicyError("{type: heuristic, initial: 9, max: 8}"),
              HasSubstr("expected an integer in [1, max]"));
  EXPECT_THAT(LengthPolicyError("{type: heuristic, speed: 2}"), HasSubstr("speed"));
}

}  // namespace
}  // namespace speclab
