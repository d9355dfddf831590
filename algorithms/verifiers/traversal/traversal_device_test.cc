// The device form of traversal verification: Monte Carlo against the target's
// law with a proven TV bound (law_check.h) on trees drawn with and without
// replacement, a negative control the same check catches, refusals, greedy
// exact match at T = 0, and the CUDA kernel against the host arithmetic.
#include "algorithms/verifiers/traversal/traversal_device.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "algorithms/verifiers/testing/random_tree_rows.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(TraversalDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("traversal",
                                   {MakeInstance({3}, 4, DraftMode::kWithoutReplacement, 3),
                                    MakeInstance({2, 2}, 4, DraftMode::kWithoutReplacement, 5),
                                    MakeInstance({2, 2}, 4, DraftMode::kIndependent, 7),
                                    MakeInstance({1, 1, 1}, 3, DraftMode::kIndependent, 9)},
                                   /*rule_seed=*/11, /*sample_seed=*/13);
}

// Drafts declared without replacement but drawn i.i.d. make the rule lossy,
// and the same check sees it.
TEST(TraversalDeviceTest, WrongSamplingIsCaught) {
  ExpectDeviceRuleCatchesMisdeclaredDrafts("traversal", DraftMode::kIndependent, DraftSampling::kWithoutReplacement);
}

TEST(TraversalDeviceTest, RefusesDeterministicDrafts) {
  auto rule = enumeration::DeviceRuleAdapter::ForRule("traversal", 11, /*flag_greedy=*/false);
  ASSERT_TRUE(rule.ok()) << rule.status();
  Instance instance = MakeInstance({2}, 4, DraftMode::kWithoutReplacement, 3);
  instance.declared_sampling = DraftSampling::kDeterministic;
  const absl::Status status = VerifyOnceStatus(**rule, instance);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(TraversalDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (const std::vector<int>& shape : {std::vector<int>{2}, std::vector<int>{2, 2}, std::vector<int>{1, 1, 1}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kWithoutReplacement, 5 + shape.size());
    instance.target.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("traversal", instance);
  }
}

TEST(TraversalDeviceTest, CudaMatchesTheHost) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  int compared = 0, descended = 0;
  for (int64_t vocab : {7, 2049, 128256}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const enumeration::RandomTreeRows c = enumeration::MakeRandomTreeRows(24, vocab, seed + vocab), d = c.Cuda();
      for (bool masked : {false, true}) {
        const at::Tensor host = traversal::TraversalWalk(c.parents, c.tokens, c.p, c.q, masked, c.uniforms, c.noise);
        const at::Tensor cuda =
            traversal::TraversalWalk(d.parents, d.tokens, d.p, d.q, masked, d.uniforms, d.noise).cpu();
        EXPECT_TRUE(at::equal(host, cuda)) << "vocab " << vocab << " seed " << seed << "\n" << host << cuda;
        ++compared;
        descended += host[0].item<int64_t>() > 0;
      }
    }
  }
  EXPECT_EQ(compared, 24);
  EXPECT_GT(descended, 0);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
