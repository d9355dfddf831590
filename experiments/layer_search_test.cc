// The layer search: every round drops the layer a brute-force scan finds
// least harmful to acceptance, the whole target accepts everything, the best
// set is the path's largest predicted speedup, and bad flags are named.
#include "experiments/layer_search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "framework/core/speculation_theory.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;

double DirectAcceptance(const LlamaModel& target, const at::Tensor& windows, const std::vector<int>& layers,
                        double temperature) {
  std::vector<int> all;
  for (int i = 0; i < target.config().num_hidden_layers; ++i) all.push_back(i);
  auto whole = LlamaModel::ShareLayers(target, all, 1);
  auto part = LlamaModel::ShareLayers(target, layers, 1);
  const int64_t v = target.config().vocab_size;
  const at::Tensor p = ((*whole)->ForwardTraining(windows).reshape({-1, v}).to(at::kDouble) / temperature).softmax(-1);
  const at::Tensor q = ((*part)->ForwardTraining(windows).reshape({-1, v}).to(at::kDouble) / temperature).softmax(-1);
  return at::minimum(p, q).sum(-1).mean().item<double>();
}

TEST(LayerSearchTest, DropsTheLeastHarmfulLayerEachRound) {
  auto target = testing::TinyModel(4, /*vocab=*/16, /*layers=*/4, /*logit_scale=*/5);
  at::Generator generator = at::detail::createCPUGenerator(3);
  const at::Tensor windows = at::randint(16, {3, 12}, generator, at::kLong);
  auto result = SearchLayers(*target, windows, {.temperature = 1.0, .max_gamma = 6});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->path.size(), 4u);
  EXPECT_NEAR(result->path[0].acceptance, 1.0, 1e-9);  // the target drafting for itself
  EXPECT_EQ(result->path[0].gamma, 0);                 // at cost 1 nothing beats decoding alone
  for (size_t round = 1; round < result->path.size(); ++round) {
    const std::vector<int>& before = result->path[round - 1].layers;
    ASSERT_EQ(result->path[round].layers.size(), before.size() - 1);
    double best = -1;
    for (size_t drop = 0; drop < before.size(); ++drop) {
      std::vector<int> kept = before;
      kept.erase(kept.begin() + static_cast<int64_t>(drop));
      best = std::max(best, DirectAcceptance(*target, windows, kept, 1.0));
    }
    EXPECT_NEAR(result->path[round].acceptance, best, 1e-9) << "round " << round;
    const LayerSetScore& s = result->path[round];
    EXPECT_DOUBLE_EQ(s.cost, LayerSetCost(target->config(), static_cast<int64_t>(s.layers.size())));
    EXPECT_EQ(s.gamma, theory::OptimalChainLength(s.acceptance, s.cost, 6));
  }
  double best_speedup = 0;
  for (const LayerSetScore& s : result->path) best_speedup = std::max(best_speedup, s.speedup);
  EXPECT_EQ(result->best.speedup, best_speedup);
}

TEST(LayerSearchTest, CostCountsTheLayersAndTheLmHead) {
  ModelConfig c;
  c.hidden_size = 4;
  c.intermediate_size = 8;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 2;
  c.vocab_size = 10;
  c.num_hidden_layers = 3;
  // A layer: 4 * 2 * (2*2 + 2*1) = 48 for attention, 3 * 4 * 8 = 96 for the MLP; the head 40.
  EXPECT_DOUBLE_EQ(LayerSetCost(c, 1), (144.0 + 40) / (3 * 144.0 + 40));
  EXPECT_DOUBLE_EQ(LayerSetCost(c, 3), 1.0);
}

TEST(LayerSearchTest, AtTemperatureZeroScoresArgmaxAgreement) {
  auto target = testing::TinyModel(5, /*vocab=*/16, /*layers=*/3);
  at::Generator generator = at::detail::createCPUGenerator(4);
  const at::Tensor windows = at::randint(16, {2, 10}, generator, at::kLong);
  auto result = SearchLayers(*target, windows, {.temperature = 0, .max_gamma = 4});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->path[0].acceptance, 1.0);
  for (const LayerSetScore& s : result->path) {
    const double share = s.acceptance * 20;  // 20 positions: a whole number of agreements
    EXPECT_NEAR(share, std::round(share), 1e-9);
  }
}

TEST(LayerSearchTest, FlagErrorsNameTheFlag) {
  EXPECT_THAT(ParseLayerSearchFlags({"--target", "t"}).status().message(), HasSubstr("--text"));
  EXPECT_THAT(ParseLayerSearchFlags({"--windows", "0"}).status().message(), HasSubstr("--windows"));
  EXPECT_THAT(ParseLayerSearchFlags({"--temperature", "-1"}).status().message(), HasSubstr("--temperature"));
  EXPECT_THAT(ParseLayerSearchFlags({"--layers", "3"}).status().message(), HasSubstr("'--layers'"));
  auto ok = ParseLayerSearchFlags({"--target", "t", "--text", "x.txt", "--out", "o.yaml", "--max-gamma", "5"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->max_gamma, 5);
}

}  // namespace
}  // namespace speclab
