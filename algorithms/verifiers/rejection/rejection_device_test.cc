// The device form of chain rejection sampling against the target's law:
// Monte Carlo with a proven TV bound (law_check.h) on small table models, a
// negative control that the same check catches, and greedy equality at T=0.
#include <gtest/gtest.h>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

using enumeration::DeviceRuleAdapter;

TEST(RejectionDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("rejection",
                                   {MakeInstance({1}, 5, DraftMode::kIndependent, 3),
                                    MakeInstance({1, 1}, 4, DraftMode::kIndependent, 5),
                                    MakeInstance({1, 1, 1}, 3, DraftMode::kWithoutReplacement, 7)},
                                   /*rule_seed=*/11, /*sample_seed=*/13);
}

TEST(RejectionDeviceTest, WrongDraftRowsAreCaught) {
  auto rule = DeviceRuleAdapter::ForRule("rejection", 11, /*flag_greedy=*/true, /*shift_draft_rows=*/true);
  ASSERT_TRUE(rule.ok()) << rule.status();
  auto sampled = enumeration::SampleAgainstTarget(**rule, MakeInstance({1, 1}, 4, DraftMode::kIndependent, 5), 20000, 13);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_GT(sampled->tv, sampled->bound);
}

TEST(RejectionDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (int depth : {1, 2, 3}) {
    Instance instance = MakeInstance(std::vector<int>(depth, 1), 4, DraftMode::kIndependent, 5 + depth);
    instance.target.one_hot = instance.draft.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("rejection", instance);
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
