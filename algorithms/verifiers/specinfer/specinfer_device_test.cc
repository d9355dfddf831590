// The device form of specinfer against the target's law: Monte Carlo with a
// proven TV bound (law_check.h) on chains and trees of small table models, a
// negative control that the same check catches, and greedy exact match at T=0.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(SpecinferDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("specinfer",
                                   {MakeInstance({3}, 4, DraftMode::kPerChildIndependent, 3),
                                    MakeInstance({2, 2}, 4, DraftMode::kPerChildIndependent, 5),
                                    MakeInstance({1, 1}, 4, DraftMode::kPerChildIndependent, 7)},
                                   /*rule_seed=*/11, /*sample_seed=*/13);
}

TEST(SpecinferDeviceTest, WrongDraftRowsAreCaught) {
  auto rule = enumeration::DeviceRuleAdapter::ForRule("specinfer", 11, /*flag_greedy=*/true, /*shift_draft_rows=*/true);
  ASSERT_TRUE(rule.ok()) << rule.status();
  auto sampled =
      enumeration::SampleAgainstTarget(**rule, MakeInstance({2, 2}, 4, DraftMode::kPerChildIndependent, 5), 20000,
                                       13);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_GT(sampled->tv, sampled->bound);
}

TEST(SpecinferDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (const std::vector<int>& shape : {std::vector<int>{2}, std::vector<int>{2, 2}, std::vector<int>{1, 1, 1}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kPerChildIndependent, 5 + shape.size());
    instance.target.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("specinfer", instance);
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
