// The device form of greedy exact match gives the host rule's verdict on
// every chain and tree drafted from the instances (T = 0 and sampled
// drafters; trees with repeated sibling tokens among them).
#include <gtest/gtest.h>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(GreedyDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (int depth : {1, 2, 3}) {
    for (DraftMode mode : {DraftMode::kTopK, DraftMode::kIndependent}) {
      Instance instance = MakeInstance(std::vector<int>(depth, 1), 4, mode, 5 + depth);
      instance.target.one_hot = true;
      auto rule = enumeration::DeviceRuleAdapter::Create("greedy", MakeVerifier("greedy")->traits(), 3);
      ASSERT_TRUE(rule.ok()) << rule.status();
      EXPECT_GT(ExpectGreedyAtTemperatureZero(**rule, instance), 0) << instance.Describe();
    }
  }
}

TEST(GreedyDeviceTest, TreeVerdictsEqualTheHostRules) {
  EXPECT_GT(ExpectDeviceVerdictsEqualTheHostRules("greedy", {DraftMode::kTopK, DraftMode::kIndependent}), 100);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
