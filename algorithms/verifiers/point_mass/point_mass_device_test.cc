// The device form of the point-mass rule on chains and trees against the
// target's law (Monte Carlo with a proven TV bound), for token-only and
// sampled drafts, and greedy equality at T=0.
#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(PointMassDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("point_mass",
                                   {MakeInstance({1, 1}, 4, DraftMode::kTopK, 5),
                                    MakeInstance({1, 1, 1}, 3, DraftMode::kIndependent, 7)},
                                   /*rule_seed=*/17, /*sample_seed=*/19);
}

TEST(PointMassDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (int depth : {1, 2, 3}) {
    Instance instance = MakeInstance(std::vector<int>(depth, 1), 4, DraftMode::kTopK, 5 + depth);
    instance.target.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("point_mass", instance);
  }
}

TEST(PointMassDeviceTest, TreeLawMatchesTarget) {
  // Branching trees, duplicate siblings included (independent draws).
  ExpectDeviceRuleLawMatchesTarget("point_mass",
                                   {MakeInstance({2, 2}, 4, DraftMode::kTopK, 5),
                                    MakeInstance({3, 1}, 3, DraftMode::kIndependent, 7)},
                                   /*rule_seed=*/23, /*sample_seed=*/29);
}

TEST(PointMassDeviceTest, TreesMatchGreedyAtTemperatureZero) {
  for (const std::vector<int>& branching : {std::vector<int>{2}, {2, 2}, {3, 2, 1}}) {
    Instance instance = MakeInstance(branching, 4, DraftMode::kTopK, 11);
    instance.target.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("point_mass", instance);
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
