// The device form of the point-mass rule on chains and trees against the
// target's law (Monte Carlo with a proven TV bound), for token-only and
// sampled drafts, and greedy equality at T=0.
#include <gtest/gtest.h>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

using enumeration::DeviceRuleAdapter;

TEST(PointMassDeviceTest, SampledLawMatchesTarget) {
  for (const Instance& instance : {MakeInstance({1, 1}, 4, DraftMode::kTopK, 5),
                                   MakeInstance({1, 1, 1}, 3, DraftMode::kIndependent, 7)}) {
    auto rule = DeviceRuleAdapter::ForRule("point_mass", 17);
    ASSERT_TRUE(rule.ok()) << rule.status();
    auto sampled = enumeration::SampleAgainstTarget(**rule, instance, 20000, 19);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    EXPECT_LT(sampled->tv, sampled->bound) << instance.Describe();
  }
}

TEST(PointMassDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (int depth : {1, 2, 3}) {
    Instance instance = MakeInstance(std::vector<int>(depth, 1), 4, DraftMode::kTopK, 5 + depth);
    instance.target.one_hot = true;
    for (bool flag_greedy : {true, false}) {
      auto rule = DeviceRuleAdapter::ForRule("point_mass", 3, flag_greedy);
      ASSERT_TRUE(rule.ok()) << rule.status();
      EXPECT_GT(ExpectGreedyAtTemperatureZero(**rule, instance), 0);
    }
  }
}

TEST(PointMassDeviceTest, TreeLawMatchesTarget) {
  // Branching trees, duplicate siblings included (independent draws).
  for (const Instance& instance : {MakeInstance({2, 2}, 4, DraftMode::kTopK, 5),
                                   MakeInstance({3, 1}, 3, DraftMode::kIndependent, 7)}) {
    auto rule = DeviceRuleAdapter::ForRule("point_mass", 23);
    ASSERT_TRUE(rule.ok()) << rule.status();
    auto sampled = enumeration::SampleAgainstTarget(**rule, instance, 20000, 29);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    EXPECT_LT(sampled->tv, sampled->bound) << instance.Describe();
  }
}

TEST(PointMassDeviceTest, TreesMatchGreedyAtTemperatureZero) {
  for (const std::vector<int>& branching : {std::vector<int>{2}, {2, 2}, {3, 2, 1}}) {
    Instance instance = MakeInstance(branching, 4, DraftMode::kTopK, 11);
    instance.target.one_hot = true;
    for (bool flag_greedy : {true, false}) {
      auto rule = DeviceRuleAdapter::ForRule("point_mass", 3, flag_greedy);
      ASSERT_TRUE(rule.ok()) << rule.status();
      EXPECT_GT(ExpectGreedyAtTemperatureZero(**rule, instance), 0);
    }
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
