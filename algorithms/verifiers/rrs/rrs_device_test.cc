// The device form of rrs against the target's law: Monte Carlo with a
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

TEST(RrsDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("rrs",
                                   {MakeInstance({3}, 4, DraftMode::kIndependent, 3),
                                    MakeInstance({2, 2}, 4, DraftMode::kIndependent, 5),
                                    MakeInstance({1, 1}, 4, DraftMode::kIndependent, 7)},
                                   /*rule_seed=*/11, /*sample_seed=*/13);
}

// Drafts declared as the rule's sampling but drawn otherwise (siblings drawn without replacement, which need masked rows)
// make the rule lossy, and the same check sees it.
TEST(RrsDeviceTest, WrongSamplingIsCaught) {
  ExpectDeviceRuleCatchesMisdeclaredDrafts("rrs", DraftMode::kWithoutReplacement, DraftSampling::kIndependent);
}

TEST(RrsDeviceTest, RefusesDraftsSampledOtherwise) {
  auto rule = enumeration::DeviceRuleAdapter::ForRule("rrs", 11);
  ASSERT_TRUE(rule.ok()) << rule.status();
  const absl::Status status = VerifyOnceStatus(**rule, MakeInstance({2}, 4, DraftMode::kWithoutReplacement, 3));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(RrsDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (const std::vector<int>& shape : {std::vector<int>{2}, std::vector<int>{2, 2}, std::vector<int>{1, 1, 1}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kIndependent, 5 + shape.size());
    instance.target.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("rrs", instance);
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
