// The device form of traversal verification: Monte Carlo against the target's
// law with a proven TV bound (law_check.h) on trees drawn with and without
// replacement, a negative control the same check catches, refusals, greedy
// exact match at T = 0, and the CUDA kernel against the host arithmetic.
#include "algorithms/verifiers/traversal/traversal_device.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
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
      at::Generator gen = at::detail::createCPUGenerator(seed + static_cast<uint64_t>(vocab));
      const int64_t n = 24;
      std::vector<int64_t> parents{-1};
      for (int64_t i = 1; i < n; ++i) parents.push_back(at::randint(0, i / 2 + 1, {1}, gen).item<int64_t>());
      const at::Tensor up = at::tensor(parents), tokens = at::randint(0, std::min<int64_t>(vocab, 5), {n}, gen);
      const auto f = at::TensorOptions().dtype(at::kFloat);
      at::Tensor p = at::rand({n, vocab}, gen, f).pow_(4), q = at::rand({n, vocab}, gen, f).pow_(4);
      p.div_(p.sum(1, true));
      q.div_(q.sum(1, true));
      const at::Tensor uniforms = at::rand({n}, gen, f), noise = at::empty({vocab}, f).exponential_(1.0, gen);
      for (bool masked : {false, true}) {
        const at::Tensor host = traversal::TraversalWalk(up, tokens, p, q, masked, uniforms, noise);
        const at::Tensor cuda = traversal::TraversalWalk(up.cuda(), tokens.cuda(), p.cuda(), q.cuda(), masked,
                                                         uniforms.cuda(), noise.cuda())
                                    .cpu();
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
