// The device form of SpecTr's K-SEQ: Monte Carlo against the target's law
// with a proven TV bound (law_check.h) on i.i.d. trees whose duplicate draws
// pool their continuations, a negative control the same check catches,
// refusals, greedy exact match at T = 0, and the CUDA kernels against their
// host twin.
#include "algorithms/verifiers/spectr/spectr_device.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "algorithms/verifiers/testing/random_tree_rows.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(SpecTrDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("spectr",
                                   {MakeInstance({3}, 3, DraftMode::kIndependent, 3),
                                    MakeInstance({2, 2}, 3, DraftMode::kIndependent, 5),
                                    MakeInstance({3, 1}, 3, DraftMode::kIndependent, 7),
                                    MakeInstance({1, 1, 1}, 3, DraftMode::kIndependent, 9)},
                                   /*rule_seed=*/11, /*sample_seed=*/13);
}

// The device form is K-SEQ, not merely some exact rule: on Khisti et al.'s
// Figure 2 instances its mean acceptance matches SpecTr's tabulated value
// within 5 standard errors of the Bernoulli mean plus the table's rounding
// (a two-sided miss has probability below 6e-7 a row).
TEST(SpecTrDeviceTest, AcceptanceIsKSeqs) {
  auto rule = enumeration::DeviceRuleAdapter::ForRule("spectr", 11);
  ASSERT_TRUE(rule.ok()) << rule.status();
  constexpr int kSamples = 20000;
  for (const Figure2Row& row : Figure2Table()) {
    auto sampled = enumeration::SampleAgainstTarget(**rule, Figure2Instance(row.q2), kSamples, 17);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    EXPECT_NEAR(sampled->mean_accepted, row.spectr,
                5 * std::sqrt(row.spectr * (1 - row.spectr) / kSamples) + kTableRounding)
        << "q2=" << row.q2;
  }
}

// Drafts drawn without replacement but declared i.i.d. make K-SEQ lossy, and
// the same check sees it.
TEST(SpecTrDeviceTest, WrongSamplingIsCaught) {
  ExpectDeviceRuleCatchesMisdeclaredDrafts("spectr", DraftMode::kWithoutReplacement, DraftSampling::kIndependent);
}

TEST(SpecTrDeviceTest, RefusesDraftsThatAreNotIid) {
  auto rule = enumeration::DeviceRuleAdapter::ForRule("spectr", 11, /*flag_greedy=*/false);
  ASSERT_TRUE(rule.ok()) << rule.status();
  for (DraftSampling declared : {DraftSampling::kWithoutReplacement, DraftSampling::kDeterministic}) {
    Instance instance = MakeInstance({2}, 4, DraftMode::kIndependent, 3);
    instance.declared_sampling = declared;
    EXPECT_EQ(VerifyOnceStatus(**rule, instance).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(SpecTrDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (const std::vector<int>& shape : {std::vector<int>{2}, std::vector<int>{2, 2}, std::vector<int>{1, 1, 1}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kIndependent, 5 + shape.size());
    instance.target.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("spectr", instance);
  }
}

TEST(SpecTrDeviceTest, CudaMatchesTheHost) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  int compared = 0, descended = 0;
  for (int64_t vocab : {7, 2049, 128256}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const enumeration::RandomTreeRows c = enumeration::MakeRandomTreeRows(24, vocab, seed + vocab), d = c.Cuda();
      const at::Tensor host = spectr::KSeqTreeWalk(c.parents, c.tokens, c.p, c.q, c.uniforms, c.noise);
      const at::Tensor cuda = spectr::KSeqTreeWalk(d.parents, d.tokens, d.p, d.q, d.uniforms, d.noise).cpu();
      EXPECT_TRUE(at::equal(host, cuda)) << "vocab " << vocab << " seed " << seed << "\n" << host << cuda;
      ++compared;
      descended += host[0].item<int64_t>() > 0;
    }
  }
  EXPECT_EQ(compared, 12);
  EXPECT_GT(descended, 0);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
