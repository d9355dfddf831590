// The layer_skip drafter: the target's tensors read in place, greedy
// equality at T = 0 (every draft accepted when it runs every layer), the
// exact law at T = 1, and its option errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "drafters/model/model_drafter.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::speclab::testing::MethodFromYaml;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3};

std::string Method(const std::string& drafter_options, const std::string& verifier) {
  return absl::StrCat("{name: m, drafter: {type: layer_skip, ", drafter_options, "}, verifier: {type: ", verifier,
                      "}, length_policy: {type: fixed, gamma: 3}}");
}

TEST(LayerSkipDrafterTest, ReadsTheTargetsTensorsInPlace) {
  auto target = TinyModel(1, /*vocab=*/16, /*layers=*/3);
  auto method = MethodFromYaml(Method("layers: [0, 2]", "greedy"), target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  auto* drafter = dynamic_cast<ModelDrafter*>(method->drafter.get());
  ASSERT_NE(drafter, nullptr);
  auto& model = dynamic_cast<LlamaModel&>(drafter->model());
  EXPECT_EQ(model.config().num_hidden_layers, 2);
  const auto mine = model.NamedParameters(), theirs = target->NamedParameters();
  auto find = [](const auto& named, const std::string& name) {
    for (const auto& [n, t] : named)
      if (n == name) return t.data_ptr();
    return static_cast<void*>(nullptr);
  };
  EXPECT_EQ(find(mine, "model.layers.1.mlp.down_proj.weight"), find(theirs, "model.layers.2.mlp.down_proj.weight"));
  EXPECT_EQ(find(mine, "model.embed_tokens.weight"), find(theirs, "model.embed_tokens.weight"));
}

TEST(LayerSkipDrafterTest, EqualsGreedyAtTemperatureZero) {
  auto target = TinyModel(1, 16, 3);
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 24};
  auto greedy = GenerateAutoregressive(*target, kPrompt, options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  for (const std::string& layers : {"exit_layer: 3", "exit_layer: 1", "layers: [0, 2]"}) {
    auto method = MethodFromYaml(Method(layers, "greedy"), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, kPrompt, options);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << layers;
    if (layers == "exit_layer: 3") {  // the target itself: every draft is accepted
      for (const StepStats& s : out->steps) EXPECT_EQ(s.accepted, s.longest_path);
    }
  }
}

TEST(LayerSkipDrafterTest, RejectionSamplingKeepsTheTargetsLaw) {
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/2, /*logit_scale=*/40);
  const testing::TwoTokenLaw law = testing::ExactTwoTokenLaw(*target, kPrompt, 1.0);
  auto method = MethodFromYaml(Method("exit_layer: 1", "rejection"), target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const testing::TwoTokenSample sample = testing::SampleTwoTokens(*target, *method, kPrompt, kRuns, 500);
  const auto [statistic, dof, critical] = testing::ChiSquareTest(sample.counts, law, kRuns);
  EXPECT_LT(statistic, critical);
  EXPECT_GT(sample.accepted, kRuns / 10) << "drafts were rarely accepted; the test would not exercise acceptance";
}

TEST(LayerSkipDrafterTest, OptionErrorsNameTheKey) {
  auto target = TinyModel(1, 16, 2);
  auto status = [&](const std::string& options) {
    return std::string(MethodFromYaml(Method(options, "greedy"), target.get()).status().message());
  };
  EXPECT_THAT(status("exit_layer: 3"), HasSubstr("key 'drafter.exit_layer': expected an integer in [1, 2]"));
  EXPECT_THAT(status("layers: [0, 5]"), HasSubstr("layer 5 is outside the target's [0, 2)"));
  EXPECT_THAT(status("exit_layer: 1, layers: [0]"), HasSubstr("exactly one of"));
  EXPECT_THAT(status("layers: []"), HasSubstr("at least one layer"));
}

}  // namespace
}  // namespace speclab
