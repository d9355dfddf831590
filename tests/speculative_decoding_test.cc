// End-to-end properties of the decoding engine on tiny random model pairs:
// greedy equality at temperature 0, the exact output law at temperature 1
// (statistical), determinism under a seed, and config-time refusals.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using ::speclab::testing::MethodFromYaml;
using ::speclab::testing::ModelDrafterMethod;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3};

DecodeOptions Options(double temperature, int max_new, uint64_t seed) {
  return {.sampling = {.temperature = temperature}, .max_new_tokens = max_new, .seed = seed, .time_phases = false};
}

std::vector<int32_t> Greedy(LanguageModel& target, int max_new) {
  auto out = GenerateAutoregressive(target, kPrompt, Options(0, max_new, 0));
  EXPECT_TRUE(out.ok()) << out.status();
  return out->tokens;
}

TEST(SpeculativeDecodingTest, ChainRejectionEqualsGreedyAtTemperatureZero) {
  auto target = TinyModel(1);
  const std::vector<int32_t> expected = Greedy(*target, 40);
  for (uint64_t drafter_seed : {1, 2}) {  // 1: the target itself (all accepted); 2: a different model
    for (const char* verifier : {"{type: rejection}", "{type: greedy}"}) {
      Method method = ModelDrafterMethod(TinyModel(drafter_seed), "{type: chain}", verifier, 4);
      auto out = GenerateSpeculative(*target, method, kPrompt, Options(0, 40, 0));
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->tokens, expected) << "drafter " << drafter_seed << " verifier " << verifier;
      int accepted = 0;
      for (const StepStats& s : out->steps) accepted += s.accepted;
      if (drafter_seed == 1) EXPECT_EQ(accepted + static_cast<int>(out->steps.size()), 40);
    }
  }
}

TEST(SpeculativeDecodingTest, PromptLookupGreedyEqualsGreedy) {
  auto target = TinyModel(3);
  const std::vector<int32_t> expected = Greedy(*target, 30);
  auto method = MethodFromYaml(
      "{name: pld, drafter: {type: prompt_lookup, max_ngram_size: 2}, verifier: {type: greedy}, "
      "length_policy: {type: fixed, gamma: 5}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  auto out = GenerateSpeculative(*target, *method, kPrompt, Options(0, 30, 0));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, expected);
}

TEST(SpeculativeDecodingTest, SameSeedSameTokens) {
  auto target = TinyModel(4);
  Method method = ModelDrafterMethod(TinyModel(5), "{type: chain}", "{type: rejection}", 3);
  auto a = GenerateSpeculative(*target, method, kPrompt, Options(1, 25, 11));
  auto b = GenerateSpeculative(*target, method, kPrompt, Options(1, 25, 11));
  auto c = GenerateSpeculative(*target, method, kPrompt, Options(1, 25, 12));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
}

// The law of the first two generated tokens, exactly, from target forwards.
std::map<std::pair<int, int>, double> ExactTwoTokenLaw(LlamaModel& target, double temperature) {
  c10::InferenceMode guard;
  const int64_t vocab = target.config().vocab_size;
  std::map<std::pair<int, int>, double> law;
  auto next = [&](std::vector<int32_t> context) {
    std::vector<int64_t> tokens(context.begin(), context.end());
    const int64_t n = static_cast<int64_t>(tokens.size());
    EXPECT_TRUE(target.Truncate(0).ok());
    auto logits = target.Forward(at::tensor(tokens), at::arange(n), at::ones({n, n}, at::kBool).tril());
    return Probabilities((*logits)[n - 1].unsqueeze(0), {.temperature = temperature})[0];
  };
  at::Tensor first = next(kPrompt);
  for (int a = 0; a < vocab; ++a) {
    std::vector<int32_t> context = kPrompt;
    context.push_back(a);
    at::Tensor second = next(context);
    for (int b = 0; b < vocab; ++b) law[{a, b}] = first[a].item<double>() * second[b].item<double>();
  }
  return law;
}

// Pearson chi-square of `runs` two-token samples against the exact law, with
// outcomes of expected count < 5 pooled. Returns {statistic, degrees of freedom}.
std::pair<double, int> ChiSquare(const std::map<std::pair<int, int>, int>& counts,
                                 const std::map<std::pair<int, int>, double>& law, int runs) {
  double statistic = 0, pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (const auto& [outcome, probability] : law) {
    const double expected = probability * runs;
    const auto it = counts.find(outcome);
    const double observed = it == counts.end() ? 0 : it->second;
    if (expected < 5) {
      pooled_expected += expected;
      pooled_observed += observed;
      continue;
    }
    statistic += (observed - expected) * (observed - expected) / expected;
    ++cells;
  }
  if (pooled_expected > 0) {
    statistic += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++cells;
  }
  return {statistic, cells - 1};
}

// Chain speculative sampling at temperature 1 samples exactly the target's law:
// 2000 two-token generations against the enumerated law (Pearson chi-square at
// a 1e-4 false-alarm level), plus a negative control showing the test has power.
// (Exactness itself is proven by enumeration in the verifier tests; this checks
// the engine around the verifier: drafting law, q rows, commit, extra token.)
TEST(SpeculativeDecodingTest, RejectionSamplingMatchesTargetLawAtTemperatureOne) {
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const auto law = ExactTwoTokenLaw(*target, 1.0);
  auto sample = [&](Method* method, uint64_t seed) {
    auto out = method ? GenerateSpeculative(*target, *method, kPrompt, Options(1, 2, seed))
                      : GenerateAutoregressive(*target, kPrompt, Options(1, 2, seed));
    EXPECT_TRUE(out.ok()) << out.status();
    return std::pair<int, int>{out->tokens[0], out->tokens[1]};
  };
  Method method = ModelDrafterMethod(TinyModel(8, 8, 1, 40), "{type: chain}", "{type: rejection}", 2);
  std::map<std::pair<int, int>, int> counts;
  for (int i = 0; i < kRuns; ++i) ++counts[sample(&method, 1000 + i)];
  auto [statistic, dof] = ChiSquare(counts, law, kRuns);
  // Wilson-Hilferty 1e-4 upper quantile of chi-square(dof).
  const double z = 3.719, h = 2.0 / (9.0 * dof);
  const double critical = dof * std::pow(1 - h + z * std::sqrt(h), 3);
  EXPECT_LT(statistic, critical) << "dof " << dof;

  // Negative control: the greedy verifier at T=1 (lossy there) is caught.
  constexpr int kControlRuns = 300;
  Method lossy = ModelDrafterMethod(TinyModel(8, 8, 1, 40), "{type: chain}", "{type: greedy}", 2);
  std::map<std::pair<int, int>, int> lossy_counts;
  for (int i = 0; i < kControlRuns; ++i) ++lossy_counts[sample(&lossy, 1000 + i)];
  auto [lossy_statistic, lossy_dof] = ChiSquare(lossy_counts, law, kControlRuns);
  const double lossy_h = 2.0 / (9.0 * lossy_dof);
  EXPECT_GT(lossy_statistic, lossy_dof * std::pow(1 - lossy_h + z * std::sqrt(lossy_h), 3));
}

TEST(SpeculativeDecodingTest, IncompatibleCombinationsAreRefusedAtLoad) {
  auto target = TinyModel(1);
  auto pld_rejection = MethodFromYaml(
      "{name: bad, drafter: {type: prompt_lookup}, verifier: {type: rejection}}", target.get());
  ASSERT_FALSE(pld_rejection.ok());
  EXPECT_THAT(pld_rejection.status().message(), HasSubstr("gives tokens only"));
  EXPECT_THAT(pld_rejection.status().message(), HasSubstr("test.yaml:1"));
  auto unknown = MethodFromYaml("{name: bad, drafter: {type: nope}, verifier: {type: greedy}}", target.get());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown drafter 'nope' (registered:"));
  auto typo = MethodFromYaml("{name: bad, drafter: {type: prompt_lookup, ngram: 3}, verifier: {type: greedy}}",
                             target.get());
  EXPECT_THAT(typo.status().message(), HasSubstr("unknown key 'drafter.ngram'"));
}

TEST(SpeculativeDecodingTest, CapacityIsReportedNotCrashed) {
  auto target = TinyModel(1, 16, 1, 30, /*capacity=*/16);
  auto out = GenerateAutoregressive(*target, kPrompt, Options(0, 40, 0));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("kv_capacity"));
}

}  // namespace
}  // namespace speclab
