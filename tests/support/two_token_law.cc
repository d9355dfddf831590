#include "tests/support/two_token_law.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "framework/sampling.h"
#include "framework/speculative_decoder.h"

namespace speclab::testing {

TwoTokenSample SampleTwoTokens(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt, int runs,
                               uint64_t first_seed, bool pipeline) {
  TwoTokenSample sample;
  for (int i = 0; i < runs; ++i) {
    auto out = GenerateSpeculative(target, method, prompt,
                                   {.sampling = {.temperature = 1}, .max_new_tokens = 2, .seed = first_seed + i,
                                    .pipeline = pipeline});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return sample;
    ++sample.counts[{out->tokens[0], out->tokens[1]}];
    for (const StepStats& s : out->steps) {
      sample.accepted += s.accepted;
      sample.branching += s.tree_nodes > s.longest_path;
    }
  }
  return sample;
}

TwoTokenLaw ExactTwoTokenLaw(LlamaModel& target, const std::vector<int32_t>& prompt, double temperature) {
  c10::InferenceMode guard;
  const int64_t vocab = target.config().vocab_size;
  auto next = [&](const std::vector<int32_t>& context) {
    std::vector<int64_t> tokens(context.begin(), context.end());
    const int64_t n = static_cast<int64_t>(tokens.size());
    EXPECT_TRUE(target.Truncate(0).ok());
    auto logits = target.Forward(at::tensor(tokens), at::arange(n), at::ones({n, n}, at::kBool).tril());
    return Probabilities((*logits)[n - 1].unsqueeze(0), {.temperature = temperature})[0];
  };
  TwoTokenLaw law;
  const at::Tensor first = next(prompt);
  for (int a = 0; a < vocab; ++a) {
    std::vector<int32_t> context = prompt;
    context.push_back(a);
    const at::Tensor second = next(context);
    for (int b = 0; b < vocab; ++b) law[{a, b}] = first[a].item<double>() * second[b].item<double>();
  }
  return law;
}

ChiSquareResult ChiSquareTest(const TwoTokenCounts& counts, const TwoTokenLaw& law, int runs) {
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
  const int dof = std::max(cells - 1, 1);
  const double z = 3.719, h = 2.0 / (9.0 * dof);
  return {statistic, dof, dof * std::pow(1 - h + z * std::sqrt(h), 3)};
}

void ExpectTheLawPipelinedAndStepByStep(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt,
                                        const TwoTokenLaw& law, int runs, const std::string& label) {
  for (bool pipeline : {true, false}) {
    const TwoTokenSample sample = SampleTwoTokens(target, method, prompt, runs, 1000, pipeline);
    const ChiSquareResult chi = ChiSquareTest(sample.counts, law, runs);
    const std::string where = label + (pipeline ? ", pipelined" : ", step by step");
    EXPECT_LT(chi.statistic, chi.critical) << where;
    EXPECT_GT(sample.accepted, runs / 40) << where << ": drafts were rarely accepted; acceptance is not exercised";
  }
}

}  // namespace speclab::testing
