#include "tests/support/pipelined_agreement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "framework/speculative_decoder.h"

namespace speclab::testing {

StepAgreement ExpectPipelinedAsStepByStep(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt,
                                          int max_new_tokens, const std::string& form) {
  StepAgreement agreement;
  DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = max_new_tokens, .time_phases = false};
  auto pipelined = GenerateSpeculative(target, method, prompt, options);
  options.pipeline = false;
  auto stepped = GenerateSpeculative(target, method, prompt, options);
  EXPECT_TRUE(pipelined.ok()) << pipelined.status();
  EXPECT_TRUE(stepped.ok()) << stepped.status();
  if (!pipelined.ok() || !stepped.ok()) return agreement;
  EXPECT_THAT(pipelined->engine_form, ::testing::HasSubstr(form));
  EXPECT_THAT(stepped->engine_form, ::testing::HasSubstr("step by step"));
  EXPECT_EQ(pipelined->tokens, stepped->tokens);
  EXPECT_EQ(pipelined->steps.size(), stepped->steps.size());
  for (size_t i = 0; i < stepped->steps.size() && i < pipelined->steps.size(); ++i) {
    EXPECT_EQ(pipelined->steps[i].accepted, stepped->steps[i].accepted) << "step " << i;
    agreement.accepted += stepped->steps[i].accepted;
    agreement.rejected += stepped->steps[i].accepted < stepped->steps[i].longest_path;
  }
  return agreement;
}

void ExpectGreedyPipelinedAndStepByStep(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt) {
  const StepAgreement seen = ExpectPipelinedAsStepByStep(target, method, prompt, 40, "pipelined");
  EXPECT_GT(seen.accepted, 0) << "no draft accepted: the comparison would not see the drafts";
  const DecodeOptions greedy_options{.sampling = {.temperature = 0}, .max_new_tokens = 24, .time_phases = false};
  auto greedy = GenerateAutoregressive(target, prompt, greedy_options);
  auto out = GenerateSpeculative(target, method, prompt, greedy_options);
  ASSERT_TRUE(greedy.ok() && out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens);
}

std::array<int, 2> AcceptedInTwoRuns(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt,
                                     int max_new_tokens, bool pipeline, const std::string& where) {
  std::array<int, 2> accepted = {0, 0};
  auto greedy = GenerateAutoregressive(target, prompt, {.sampling = {.temperature = 0}, .max_new_tokens = max_new_tokens});
  EXPECT_TRUE(greedy.ok()) << greedy.status();
  if (!greedy.ok()) return accepted;
  for (int run = 0; run < 2; ++run) {
    auto out = GenerateSpeculative(target, method, prompt,
                                   {.sampling = {.temperature = 0}, .max_new_tokens = max_new_tokens, .pipeline = pipeline});
    EXPECT_TRUE(out.ok()) << where << ": " << out.status();
    if (!out.ok()) return accepted;
    EXPECT_EQ(out->tokens, greedy->tokens) << where << ", run " << run;
    if (pipeline) EXPECT_THAT(out->engine_form, ::testing::HasSubstr("pipelined")) << where;
    for (const StepStats& step : out->steps) accepted[run] += step.accepted;
  }
  return accepted;
}

}  // namespace speclab::testing
