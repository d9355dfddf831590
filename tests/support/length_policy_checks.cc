#include "tests/support/length_policy_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab::testing {

absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> MakeLengthPolicy(const std::string& yaml) {
  ASSIGN_OR_RETURN(Options options, Options::FromString(yaml, "policy.yaml"));
  return LengthPolicyRegistry::Create(options, "length policy");
}

std::string LengthPolicyError(const std::string& yaml) {
  return std::string(MakeLengthPolicy(yaml).status().message());
}

namespace {

// The policy of `policy_yaml` in `method`.
void Install(Method& method, const std::string& policy_yaml, const std::string& policy_name) {
  auto policy = MakeLengthPolicy(policy_yaml);
  ASSERT_TRUE(policy.ok()) << policy.status();
  method.policy = *std::move(policy);
  method.policy_name = policy_name;
}

}  // namespace

void ExpectGreedyWithAMovingLength(const std::string& policy_yaml, const std::string& policy_name,
                                   uint64_t drafter_seed, double drafter_logit_scale) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3};
  auto target = TinyModel(1);
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 40};
  auto greedy = GenerateAutoregressive(*target, prompt, options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  Method method =
      ModelDrafterMethod(TinyModel(drafter_seed, 16, 2, drafter_logit_scale), "{type: chain}", "{type: greedy}", 1);
  Install(method, policy_yaml, policy_name);
  auto out = GenerateSpeculative(*target, method, prompt, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens) << policy_yaml;
  std::set<int> lengths;
  for (const StepStats& s : out->steps) lengths.insert(s.longest_path);
  EXPECT_GT(lengths.size(), 1u) << policy_yaml << ": the draft length never moved";
  EXPECT_THAT(out->engine_form, ::testing::HasSubstr("the length policy '" + policy_name + "'"));
}

void ExpectChainLawWithPolicy(const std::string& policy_yaml, const std::string& policy_name) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3};
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const TwoTokenLaw law = ExactTwoTokenLaw(*target, prompt, 1.0);
  // The target's network at a lower logit scale drafts: close enough to accept often.
  Method method = ModelDrafterMethod(TinyModel(7, 8, 1, 15), "{type: chain}", "{type: rejection}", 1);
  Install(method, policy_yaml, policy_name);
  constexpr int kRuns = 2000;
  TwoTokenCounts counts;
  std::set<int> lengths;
  for (int i = 0; i < kRuns; ++i) {
    const DecodeOptions options{
        .sampling = {.temperature = 1}, .max_new_tokens = 2, .seed = 1000 + static_cast<uint64_t>(i)};
    auto out = GenerateSpeculative(*target, method, prompt, options);
    ASSERT_TRUE(out.ok()) << out.status();
    ++counts[{out->tokens[0], out->tokens[1]}];
    for (const StepStats& s : out->steps) lengths.insert(s.longest_path);
  }
  const ChiSquareResult result = ChiSquareTest(counts, law, kRuns);
  EXPECT_LT(result.statistic, result.critical) << policy_yaml;
  EXPECT_GT(lengths.size(), 1u) << policy_yaml << ": the policy never changed its length";
}

}  // namespace speclab::testing
