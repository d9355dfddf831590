// The heuristic schedule, step by step and in the engine: lossless (greedy
// equality at T = 0), its length moving with acceptance, and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "framework/core/length_policy.h"
#include "tests/support/length_policy_checks.h"

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

TEST(HeuristicLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(LengthPolicyError("{type: heuristic, initial: 0}"), HasSubstr("initial"));
  EXPECT_THAT(LengthPolicyError("{type: heuristic, max: 65}"), HasSubstr("max"));
  EXPECT_THAT(LengthPolicyError("{type: heuristic, initial: 9, max: 8}"),
              HasSubstr("expected an integer in [1, max]"));
  EXPECT_THAT(LengthPolicyError("{type: heuristic, speed: 2}"), HasSubstr("speed"));
}

}  // namespace
}  // namespace speclab
