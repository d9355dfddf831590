// The device form of block verification against the target's law: Monte
// Carlo with a proven TV bound (law_check.h) on small table models, and
// greedy equality at T=0. (The harness's power is shown by the negative
// control in rejection_device_test.cc; handing block the wrong q rows moves
// its law too little to serve as one: TV about 0.02 at 150000 draws.)
#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(BlockDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("block",
                                   {MakeInstance({1}, 5, DraftMode::kIndependent, 3),
                                    MakeInstance({1, 1}, 4, DraftMode::kIndependent, 5),
                                    MakeInstance({1, 1, 1}, 3, DraftMode::kWithoutReplacement, 7),
                                    MakeInstance({1, 1, 1, 1}, 4, DraftMode::kIndependent, 9)},
                                   /*rule_seed=*/11, /*sample_seed=*/13);
}

TEST(BlockDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (int depth : {1, 2, 3}) {
    Instance instance = MakeInstance(std::vector<int>(depth, 1), 4, DraftMode::kIndependent, 5 + depth);
    instance.target.one_hot = instance.draft.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("block", instance);
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
