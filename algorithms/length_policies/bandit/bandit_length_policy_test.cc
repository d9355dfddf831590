// The bandit length policy: its choices on scripted outcomes (every arm once,
// then the best reward, per second or per step), its own seeded randomness,
// and in the engine: greedy's tokens at T = 0 with a moving length, and the
// target's law at T = 1 with Thompson sampling choosing at random.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "framework/core/length_policy.h"
#include "tests/support/length_policy_checks.h"

namespace speclab {
namespace {

using ::speclab::testing::LengthPolicyError;
using ::speclab::testing::MakeLengthPolicy;

using ::testing::HasSubstr;

// Pulls per length over `steps` steps, each arm's outcome given by `outcome(length)`.
template <typename Outcome>
std::map<int, int> PullsOver(DraftLengthPolicy& policy, int steps, Outcome outcome) {
  std::map<int, int> pulls;
  for (int i = 0; i < steps; ++i) {
    const int length = policy.MaxDraftLength();
    ++pulls[length];
    policy.Observe(outcome(length));
  }
  return pulls;
}

TEST(BanditLengthPolicyTest, TriesEveryArmThenKeepsTheBest) {
  for (const char* algorithm : {"ucb", "thompson"}) {
    auto policy = MakeLengthPolicy(absl::StrCat("{type: bandit, arms: [1, 2, 4, 8], algorithm: ", algorithm, "}"));
    ASSERT_TRUE(policy.ok()) << policy.status();
    EXPECT_FALSE((*policy)->length_is_fixed());
    std::vector<int> first;
    for (int i = 0; i < 4; ++i) {
      first.push_back((*policy)->MaxDraftLength());
      (*policy)->Observe({.drafted = first.back(), .accepted = 0, .step_seconds = 1});
    }
    EXPECT_EQ(first, (std::vector<int>{1, 2, 4, 8})) << algorithm;
    // Length 4 emits five tokens a second, the others one.
    const std::map<int, int> pulls = PullsOver(**policy, 200, [](int length) {
      return StepOutcome{.drafted = length, .accepted = length == 4 ? 4 : 0, .step_seconds = 1};
    });
    EXPECT_GT(pulls.at(4), 150) << algorithm;
  }
}

// Length 8 emits more tokens a step (9 against 3) but takes four times as
// long: tokens per second prefer 2, tokens per step prefer 8.
TEST(BanditLengthPolicyTest, RewardsTokensPerSecondOrPerStep) {
  const auto outcome = [](int length) {
    return StepOutcome{.drafted = length, .accepted = length, .step_seconds = length == 8 ? 4.0 : 1.0};
  };
  auto per_second = MakeLengthPolicy("{type: bandit, arms: [2, 8]}");
  auto per_step = MakeLengthPolicy("{type: bandit, arms: [2, 8], reward: tokens_per_step}");
  ASSERT_TRUE(per_second.ok() && per_step.ok());
  EXPECT_GT(PullsOver(**per_second, 200, outcome)[2], 150);
  EXPECT_GT(PullsOver(**per_step, 200, outcome)[8], 150);
}

TEST(BanditLengthPolicyTest, ThompsonDrawsFromItsOwnSeededGenerator) {
  const auto outcome = [](int length) {
    return StepOutcome{.drafted = length, .accepted = length / 2, .step_seconds = 1};
  };
  std::vector<std::map<int, int>> runs;
  for (const char* seed : {"3", "3", "4"}) {
    auto policy =
        MakeLengthPolicy(absl::StrCat("{type: bandit, arms: [1, 2, 3, 4], algorithm: thompson, seed: ", seed, "}"));
    ASSERT_TRUE(policy.ok()) << policy.status();
    runs.push_back(PullsOver(**policy, 60, outcome));
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_NE(runs[0], runs[2]);
}

TEST(BanditLengthPolicyTest, KeepsWhatItLearnedAcrossPromptsUnlessTransient) {
  for (bool transient : {false, true}) {
    auto policy =
        MakeLengthPolicy(absl::StrCat("{type: bandit, arms: [1, 2], transient: ", transient ? "true" : "false", "}"));
    ASSERT_TRUE(policy.ok()) << policy.status();
    PullsOver(**policy, 10,
              [](int length) { return StepOutcome{.drafted = length, .accepted = length, .step_seconds = 1}; });
    (*policy)->Reset();
    // A fresh bandit starts with arm 1; one that learned goes for 2 (three tokens a second against two).
    EXPECT_EQ((*policy)->MaxDraftLength(), transient ? 1 : 2);
  }
}

TEST(BanditLengthPolicyTest, EqualsGreedyAndMovesItsLengthInTheEngine) {
  testing::ExpectGreedyWithAMovingLength("{type: bandit, arms: [1, 3, 6]}", "bandit", /*drafter_seed=*/2);
}

// Thompson sampling picks lengths at random from its own generator; the
// target's law holds.
TEST(BanditLengthPolicyTest, ThompsonSamplingKeepsTheTargetLaw) {
  testing::ExpectChainLawWithPolicy("{type: bandit, arms: [1, 2, 3], algorithm: thompson, reward: tokens_per_step}",
                                    "bandit");
}

TEST(BanditLengthPolicyTest, OptionErrorsNameTheKey) {
  EXPECT_THAT(LengthPolicyError("{type: bandit, arms: []}"), HasSubstr("arms"));
  EXPECT_THAT(LengthPolicyError("{type: bandit, arms: [0, 2]}"), HasSubstr("outside [1, 64]"));
  EXPECT_THAT(LengthPolicyError("{type: bandit, arms: [2, 2]}"), HasSubstr("listed twice"));
  EXPECT_THAT(LengthPolicyError("{type: bandit, algorithm: exp3}"), HasSubstr("algorithm"));
  EXPECT_THAT(LengthPolicyError("{type: bandit, exploration: -1}"), HasSubstr("exploration"));
  EXPECT_THAT(LengthPolicyError("{type: bandit, reward: accepted}"), HasSubstr("reward"));
  EXPECT_THAT(LengthPolicyError("{type: bandit, arm: [2]}"), HasSubstr("arm"));
}

}  // namespace
}  // namespace speclab
