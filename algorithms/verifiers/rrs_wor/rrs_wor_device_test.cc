// The device form of rrs_wor against the target's law: Monte Carlo with a
// proven TV bound (law_check.h) on chains and trees of small table models, a
// negative control that the same check catches (the other sampling mode), and greedy exact match at T=0.
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(RrsWorDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("rrs_wor",
                                   {MakeInstance({3}, 4, DraftMode::kWithoutReplacement, 3),
                                    MakeInstance({2, 2}, 4, DraftMode::kWithoutReplacement, 5),
                                    MakeInstance({1, 1}, 4, DraftMode::kWithoutReplacement, 7)},
                                   /*rule_seed=*/11, /*sample_seed=*/13);
}

// Drafts declared as the rule's sampling but drawn otherwise (i.i.d. siblings, which must not be masked)
// make the rule lossy, and the same check sees it.
TEST(RrsWorDeviceTest, WrongSamplingIsCaught) {
  ExpectDeviceRuleCatchesMisdeclaredDrafts("rrs_wor", DraftMode::kIndependent, DraftSampling::kWithoutReplacement);
}

TEST(RrsWorDeviceTest, RefusesDraftsSampledOtherwise) {
  auto rule = enumeration::DeviceRuleAdapter::ForRule("rrs_wor", 11);
  ASSERT_TRUE(rule.ok()) << rule.status();
  const absl::Status status = VerifyOnceStatus(**rule, MakeInstance({2}, 4, DraftMode::kIndependent, 3));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(RrsWorDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (const std::vector<int>& shape : {std::vector<int>{2}, std::vector<int>{2, 2}, std::vector<int>{1, 1, 1}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kWithoutReplacement, 5 + shape.size());
    instance.target.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("rrs_wor", instance);
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
