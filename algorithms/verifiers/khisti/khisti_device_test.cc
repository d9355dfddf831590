// The device form of Khisti's canonical two-step rule: Monte Carlo against
// the target's law with a proven TV bound (law_check.h), its acceptance
// against the host rule's exact value, a negative control the same check
// catches, refusals (drafts that are not i.i.d., supports beyond the exact
// selection law), greedy exact match at T = 0, and the CUDA kernels against
// their host twin.
#include "algorithms/verifiers/khisti/khisti_device.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "algorithms/verifiers/testing/random_tree_rows.h"
#include "framework/core/options.h"
#include "framework/device/device_verifier.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(KhistiDeviceTest, SampledLawMatchesTarget) {
  ExpectDeviceRuleLawMatchesTarget("khisti",
                                   {MakeInstance({3}, 3, DraftMode::kIndependent, 3),
                                    MakeInstance({2, 2}, 3, DraftMode::kIndependent, 5),
                                    MakeInstance({3, 1}, 3, DraftMode::kIndependent, 7),
                                    MakeInstance({1, 1, 1}, 3, DraftMode::kIndependent, 9)},
                                   /*rule_seed=*/11, /*sample_seed=*/13);
}

// The device form is the canonical rule, not merely some exact one: on
// Khisti et al.'s Figure 2 instances its mean acceptance matches the host
// rule's exact value within 5 standard errors of the Bernoulli mean
// (a two-sided miss has probability below 6e-7 a row).
TEST(KhistiDeviceTest, AcceptanceIsTheHostRules) {
  auto host = MakeVerifier("khisti");
  ASSERT_NE(host, nullptr);
  auto rule = enumeration::DeviceRuleAdapter::ForRule("khisti", 11);
  ASSERT_TRUE(rule.ok()) << rule.status();
  constexpr int kSamples = 20000;
  for (const Figure2Row& row : Figure2Table()) {
    const Instance instance = Figure2Instance(row.q2);
    const double exact = ExpectedAccepted(*host, instance);
    auto sampled = enumeration::SampleAgainstTarget(**rule, instance, kSamples, 17);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    EXPECT_NEAR(sampled->mean_accepted, exact, 5 * std::sqrt(exact * (1 - exact) / kSamples) + 1e-12)
        << "q2=" << row.q2;
  }
}

// Drafts drawn without replacement but declared i.i.d. make the rule lossy
// (r is the law of i.i.d. draws), and the same check sees it.
TEST(KhistiDeviceTest, WrongSamplingIsCaught) {
  ExpectDeviceRuleCatchesMisdeclaredDrafts("khisti", DraftMode::kWithoutReplacement, DraftSampling::kIndependent);
}

TEST(KhistiDeviceTest, RefusesDraftsThatAreNotIid) {
  auto rule = enumeration::DeviceRuleAdapter::ForRule("khisti", 11, /*flag_greedy=*/false);
  ASSERT_TRUE(rule.ok()) << rule.status();
  for (DraftSampling declared : {DraftSampling::kWithoutReplacement, DraftSampling::kDeterministic}) {
    Instance instance = MakeInstance({2}, 4, DraftMode::kIndependent, 3);
    instance.declared_sampling = declared;
    EXPECT_EQ(VerifyOnceStatus(**rule, instance).code(), absl::StatusCode::kInvalidArgument);
  }
}

// Without a top_k, two drafts over a 4096-token vocabulary need 4096^2 >
// 1e7 tuples: refused, naming the fix; with top_k 100 they verify.
TEST(KhistiDeviceTest, RefusesSupportsBeyondTheExactSelectionLaw) {
  const auto* entry = DeviceVerifierRegistry::Find("khisti");
  ASSERT_NE(entry, nullptr);
  auto options = Options::FromString("{}", "test");
  ASSERT_TRUE(options.ok()) << options.status();
  auto rule = entry->create(*options);
  ASSERT_TRUE(rule.ok()) << rule.status();
  constexpr int64_t kVocab = 4096;
  const at::Tensor rows = at::softmax(at::randn({3, kVocab}), 1);
  DeviceTreeProblem problem{.tokens = at::tensor(std::vector<int64_t>{0, 5, 9}, at::kLong),
                            .parents = at::tensor(std::vector<int64_t>{-1, 0, 0}, at::kLong),
                            .target_probs = rows,
                            .draft_probs = rows,
                            .sampling = DraftSampling::kIndependent,
                            .branching_bound = 2};
  at::Generator generator = at::detail::createCPUGenerator(3);
  const absl::Status refused = (*rule)->VerifyTree(problem, generator).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("top_k"), std::string::npos) << refused;
  problem.draft_support_bound = 100;
  EXPECT_TRUE((*rule)->VerifyTree(problem, generator).ok());
}

// `selection: optimal` is solved on the host: the device form declines it
// (Unimplemented, which a method reports as its reason to run the host rule)
// and still takes the importance rule, and a misspelt selection is an error.
TEST(KhistiDeviceTest, DeclinesTheOptimalSelection) {
  const auto* entry = DeviceVerifierRegistry::Find("khisti");
  ASSERT_NE(entry, nullptr);
  auto create = [&](const char* spec) {
    auto options = Options::FromString(spec, "test");
    EXPECT_TRUE(options.ok()) << options.status();
    return entry->create(*options);
  };
  const auto declined = create("{selection: optimal}");
  EXPECT_EQ(declined.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(declined.status().message().find("on the host"), std::string::npos) << declined.status();
  EXPECT_TRUE(create("{selection: importance}").ok());
  EXPECT_EQ(create("{selection: best}").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KhistiDeviceTest, MatchesGreedyAtTemperatureZero) {
  for (const std::vector<int>& shape : {std::vector<int>{2}, std::vector<int>{2, 2}, std::vector<int>{1, 1, 1}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kIndependent, 5 + shape.size());
    instance.target.one_hot = true;
    ExpectDeviceRuleGreedyAtTemperatureZero("khisti", instance);
  }
}

// q rows cut to their first `support` entries (the drafted tokens are among
// the first 5) and renormalised; support 0 keeps them whole, so that every
// node with two drafts or more stops without trying them.
at::Tensor CutRows(const at::Tensor& q, int64_t support) {
  if (support == 0) return q;
  at::Tensor cut = at::zeros_like(q);
  cut.narrow(1, 0, support).copy_(q.narrow(1, 0, support));
  return cut / cut.sum(1, true);
}

TEST(KhistiDeviceTest, CudaMatchesTheHost) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  int compared = 0, descended = 0;
  for (int64_t vocab : {7, 2049, 128256}) {
    for (int64_t support : {0, 6, 40}) {
      for (uint64_t seed = 1; seed <= 2; ++seed) {
        enumeration::RandomTreeRows c = enumeration::MakeRandomTreeRows(24, vocab, seed + vocab);
        c.q = CutRows(c.q, std::min(support, vocab));
        c.uniforms = at::cat({c.uniforms, c.uniforms.flip(0)});
        const enumeration::RandomTreeRows d = c.Cuda();
        const at::Tensor host = khisti::CanonicalTreeWalk(c.parents, c.tokens, c.p, c.q, c.uniforms, c.noise, 1e7);
        const at::Tensor cuda =
            khisti::CanonicalTreeWalk(d.parents, d.tokens, d.p, d.q, d.uniforms, d.noise, 1e7).cpu();
        EXPECT_TRUE(at::equal(host, cuda)) << "vocab " << vocab << " support " << support << " seed " << seed << "\n"
                                           << host << cuda;
        ++compared;
        descended += host[0].item<int64_t>() > 0;
      }
    }
  }
  EXPECT_EQ(compared, 18);
  EXPECT_GT(descended, 0);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
