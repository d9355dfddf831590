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
  for (const Instance& instance : {MakeInstance({1}, 5, DraftMode::kIndependent, 3),
                                   MakeInstance({1, 1}, 4, DraftMode::kIndependent, 5),
                                   MakeInstance({1, 1, 1}, 3, DraftMode::kWithoutReplacement, 7)}) {
    auto rule = DeviceRuleAdapter::ForRule("rejection", 11);
    ASSERT_TRUE(rule.ok()) << rule.status();
    auto sampled = enumeration::SampleAgainstTarget(**rule, instance, 20000, 13);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    EXPECT_LT(sampled->tv, sampled->bound) << instance.Describe();
  }
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
    for (bool flag_greedy : {true, false}) {  // the fast path, and the general rule on one-hot rows
      auto rule = DeviceRuleAdapter::ForRule("rejection", 3, flag_greedy, /*shift_draft_rows=*/false);
      ASSERT_TRUE(rule.ok()) << rule.status();
      EXPECT_GT(ExpectGreedyAtTemperatureZero(**rule, instance), 0);
    }
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
