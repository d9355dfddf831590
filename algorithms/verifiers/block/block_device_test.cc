// The device form of block verification against the target's law: Monte
// Carlo with a proven TV bound (law_check.h) on small table models, and
// greedy equality at T=0. (The harness's power is shown by the negative
// control in rejection_device_test.cc; handing block the wrong q rows moves
// its law too little to serve as one: TV about 0.02 at 150000 draws.)
#include <gtest/gtest.h>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

using enumeration::DeviceRuleAdapter;

TEST(BlockDeviceTest, SampledLawMatchesTarget) {
  for (const Instance& instance : {MakeInstance({1}, 5, DraftMode::kIndependent, 3),
                                   MakeInstance({1, 1}, 4, DraftMode::kIndependent, 5),
                                   MakeInstance({1, 1, 1}, 3, DraftMode::kWithoutReplacement, 7),
                                   MakeInstance({1, 1, 1, 1}, 4, DraftMode::kIndependent, 9)}) {
    auto rule = DeviceRuleAdapter::ForRule("block", 11);
    ASSERT_TRUE(rule.ok()) << rule.status();
    auto sampled = enumeration::SampleAgainstTarget(**rule, instance, 20000, 13);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    EXPECT_LT(sampled->tv, sampled->bound) << instance.Describe();
  }
}

TEST(BlockDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (int depth : {1, 2, 3}) {
    Instance instance = MakeInstance(std::vector<int>(depth, 1), 4, DraftMode::kIndependent, 5 + depth);
    instance.target.one_hot = instance.draft.one_hot = true;
    for (bool flag_greedy : {true, false}) {  // the fast path, and the general rule on one-hot rows
      auto rule = DeviceRuleAdapter::ForRule("block", 3, flag_greedy);
      ASSERT_TRUE(rule.ok()) << rule.status();
      EXPECT_GT(ExpectGreedyAtTemperatureZero(**rule, instance), 0);
    }
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
