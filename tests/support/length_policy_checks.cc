#include "tests/support/length_policy_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"

namespace speclab::testing {

void ExpectGreedyWithAMovingLength(const std::string& policy_yaml, const std::string& policy_name,
                                   uint64_t drafter_seed) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3};
  auto target = TinyModel(1);
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 40};
  auto greedy = GenerateAutoregressive(*target, prompt, options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  Method method = ModelDrafterMethod(TinyModel(drafter_seed), "{type: chain}", "{type: greedy}", 1);
  auto spec = Options::FromString(policy_yaml, "policy.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto policy = LengthPolicyRegistry::Create(*spec, "length policy");
  ASSERT_TRUE(policy.ok()) << policy.status();
  method.policy = *std::move(policy);
  method.policy_name = policy_name;
  auto out = GenerateSpeculative(*target, method, prompt, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens) << policy_yaml;
  std::set<int> lengths;
  for (const StepStats& s : out->steps) lengths.insert(s.longest_path);
  EXPECT_GT(lengths.size(), 1u) << policy_yaml << ": the draft length never moved";
  EXPECT_THAT(out->engine_form, ::testing::HasSubstr("the length policy '" + policy_name + "' decides each step"));
}

}  // namespace speclab::testing
