// The heuristic schedule, step by step and in the engine: lossless (greedy
// equality at T = 0), its length moving with acceptance, and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using ::speclab::testing::ModelDrafterMethod;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> Policy(const std::string& yaml) {
  ASSIGN_OR_RETURN(Options options, Options::FromString(yaml, "policy.yaml"));
  return LengthPolicyRegistry::Create(options, "length policy");
}

TEST(HeuristicLengthPolicyTest, GrowsByTwoAfterFullAcceptanceAndShrinksByOne) {
  auto policy = Policy("{type: heuristic, initial: 3, max: 6}");
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

  auto transient = Policy("{type: heuristic, initial: 3, transient: true}");
  ASSERT_TRUE(transient.ok()) << transient.status();
  (*transient)->Observe({.drafted = 3, .accepted = 0});
  (*transient)->Reset();
  EXPECT_EQ((*transient)->MaxDraftLength(), 3);  // "heuristic_transient"
}

TEST(HeuristicLengthPolicyTest, EqualsGreedyAndMovesItsLengthInTheEngine) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3};
  auto target = TinyModel(1);
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 40};
  auto greedy = GenerateAutoregressive(*target, prompt, options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  // The target's own weights drafting: at T = 0 every draft is accepted, so the length grows 2, 4, 6, ...
  Method method = ModelDrafterMethod(TinyModel(1), "{type: chain}", "{type: greedy}", 1);
  auto policy = Policy("{type: heuristic, initial: 2}");
  ASSERT_TRUE(policy.ok()) << policy.status();
  method.policy = *std::move(policy);
  method.policy_name = "heuristic";
  auto out = GenerateSpeculative(*target, method, prompt, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens);
  std::set<int> lengths;
  for (const StepStats& s : out->steps) lengths.insert(s.longest_path);
  EXPECT_GT(lengths.size(), 2u) << "the draft length never moved";
  EXPECT_THAT(out->engine_form, HasSubstr("the length policy 'heuristic' decides each step"));
}

TEST(HeuristicLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(std::string(Policy("{type: heuristic, initial: 0}").status().message()), HasSubstr("initial"));
  EXPECT_THAT(std::string(Policy("{type: heuristic, max: 65}").status().message()), HasSubstr("max"));
  EXPECT_THAT(std::string(Policy("{type: heuristic, initial: 9, max: 8}").status().message()),
              HasSubstr("expected an integer in [1, max]"));
  EXPECT_THAT(std::string(Policy("{type: heuristic, speed: 2}").status().message()), HasSubstr("speed"));
}

}  // namespace
}  // namespace speclab
