#include "tests/support/prompt_features.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace speclab::testing {

TargetFeatures PromptFeatures(LlamaModel& target, const std::vector<int32_t>& prompt, const std::vector<int>& layers) {
  EXPECT_TRUE(target.Truncate(0).ok());
  EXPECT_TRUE(target.KeepHiddenStates(layers).ok());
  const std::vector<int64_t> head(prompt.begin(), prompt.end() - 1);
  const at::Tensor tokens = at::tensor(head, at::kLong);
  EXPECT_TRUE(target.Forward(tokens, at::arange(tokens.size(0), at::kLong), at::Tensor()).ok());
  TargetFeatures features;
  for (int layer : layers) features.hidden.push_back(target.HiddenStates(layer)->clone());
  return features;
}

}  // namespace speclab::testing
