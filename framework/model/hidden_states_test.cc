// LlamaModel's hidden states (KeepHiddenStates / HiddenStates) and the
// models built from its weights (ShareLayers, Embed, FinalNorm, LmHead).
// transformers' own hidden states are checked in hf_parity_test.cc.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/model/llama_model.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/float_tolerance.h"

namespace speclab {
namespace {

using ::speclab::testing::TestDevice;

ModelConfig ThreeLayers() {
  ModelConfig c;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  return c;
}

std::unique_ptr<LlamaModel> Target(bool static_shapes) {
  auto model = LlamaModel::CreateRandom(ThreeLayers(), TestDevice(), at::kFloat, /*kv_capacity=*/64, /*seed=*/3);
  EXPECT_TRUE(model.ok()) << model.status();
  (*model)->EnableCudaGraphs(static_shapes);
  return *std::move(model);
}

at::Tensor Tokens() { return at::tensor(std::vector<int64_t>{5, 9, 1, 33, 2, 60, 7}, at::kLong).to(TestDevice()); }

// Feeds Tokens() as a causal chain at positions 0.. and returns its logits.
at::Tensor FeedTokens(LanguageModel& model) {
  const at::Tensor tokens = Tokens();
  auto logits = model.Forward(tokens, at::arange(tokens.size(0), tokens.options()), at::Tensor());
  EXPECT_TRUE(logits.ok()) << logits.status();
  return *logits;
}

// The LM head applied again to the kept last state equals the forward's
// logits up to the summation order of the final norm and the head's matmul:
// BLAS may block a product of another row count differently (OpenBLAS's
// small-matrix kernels on AVX-512 do), so the bound is that of two orders.
void ExpectLogitsOfKeptState(const LlamaModel& model, const at::Tensor& logits) {
  const at::Tensor again = model.LmHead(*model.HiddenStates(-1)).cpu();
  const double u = testing::UnitRoundoff(at::kFloat);
  const double tolerance = 2 * 2 * float_bounds::Gamma(model.config().hidden_size, u);
  EXPECT_LE((again - logits.cpu()).abs().max().item<double>(), tolerance * logits.abs().max().item<double>());
}

at::Tensor Kept(const LanguageModel& model, int layer) {
  auto states = model.HiddenStates(layer);
  EXPECT_TRUE(states.ok()) << states.status();
  return states.ok() ? states->cpu() : at::Tensor();
}

class HiddenStatesTest : public ::testing::TestWithParam<bool> {};  // static shapes (the graph path's body)

INSTANTIATE_TEST_SUITE_P(Forward, HiddenStatesTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Static" : "Plain"; });

// Index 0 is the embedding rows, index L feeds the LM head, and index i is
// what i layers make of the tokens: a model of the target's first i + 1
// layers, run on the same tokens, keeps bit-equal states at index i (the
// same kernels on the same inputs).
TEST_P(HiddenStatesTest, AreTransformersHiddenStates) {
  auto target = Target(GetParam());
  const int layers = static_cast<int>(target->config().num_hidden_layers);
  ASSERT_TRUE(target->KeepHiddenStates({0, 1, 2}).ok());
  const at::Tensor logits = FeedTokens(*target);
  EXPECT_TRUE(at::equal(Kept(*target, 0), target->Embed(Tokens()).cpu()));
  EXPECT_TRUE(at::equal(Kept(*target, -1), Kept(*target, layers)));
  ExpectLogitsOfKeptState(*target, logits);
  for (int i = 1; i < layers; ++i) {
    std::vector<int> first(i + 1);
    for (int j = 0; j <= i; ++j) first[j] = j;
    auto prefix = LlamaModel::ShareLayers(*target, first, /*kv_capacity=*/64);
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    (*prefix)->EnableCudaGraphs(GetParam());
    ASSERT_TRUE((*prefix)->KeepHiddenStates({i}).ok());
    FeedTokens(**prefix);
    EXPECT_TRUE(at::equal(Kept(**prefix, i), Kept(*target, i))) << "layer " << i;
  }
}

TEST_P(HiddenStatesTest, FollowDevicePositionedForwardsOnly) {
  auto target = Target(GetParam());
  const at::Tensor tokens = Tokens();
  ASSERT_TRUE(target->KeepHiddenStates({1}).ok());
  const DevicePosition at{.start = at::zeros({1}, tokens.options()), .max_start = 0};
  auto logits = target->ForwardAt(tokens, at);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(Kept(*target, 1).sizes(), (std::vector<int64_t>{tokens.size(0), 32}));
  ExpectLogitsOfKeptState(*target, *logits);
  // Chains are drafting: they keep nothing, and say so.
  ASSERT_TRUE(target->Truncate(3).ok());
  const ChainPick argmax = ChainPick::Of([](const std::tuple<>&, const at::Tensor& l, const at::Tensor&) {
    return ChainPick::Result{l.argmax(-1), at::Tensor()};
  });
  ASSERT_TRUE(target->ForwardChain(tokens.narrow(0, 3, 1), 3, 2, argmax).ok());
  EXPECT_EQ(target->HiddenStates(-1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(HiddenStatesErrorsTest, NameTheIndexAndWhatIsKept) {
  auto target = Target(false);
  absl::Status bad = target->KeepHiddenStates({4});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("hidden state 4 of a model with 3 layers"), absl::string_view::npos) << bad;
  EXPECT_EQ(target->KeepHiddenStates({-5}).code(), absl::StatusCode::kInvalidArgument);
  FeedTokens(*target);
  absl::StatusOr<at::Tensor> unkept = target->HiddenStates(1);
  EXPECT_EQ(unkept.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(unkept.status().message().find("not kept"), absl::string_view::npos) << unkept.status();
}

// The training forward keeps the same states as the cached forward, up to
// the fused kernels' other summation orders (a forward's bound), and its
// attention pattern is the one it is given: a row that may see only itself
// is the first row's computation at its own position and token.
TEST(TrainingLayersTest, AreTheForwardsHiddenStatesOnAnyPattern) {
  auto target = Target(false);
  ASSERT_TRUE(target->KeepHiddenStates({0, 1, 2, 3}).ok());
  FeedTokens(*target);
  const at::Tensor tokens = Tokens();
  const int64_t t = tokens.size(0);
  const at::Tensor positions = at::arange(t, tokens.options());
  const at::Tensor causal = at::ones({t, t}, tokens.options().dtype(at::kBool)).tril();
  auto states = target->ForwardTrainingLayers(target->Embed(tokens).unsqueeze(0), positions, causal, {1, 0, -1, 2});
  ASSERT_TRUE(states.ok()) << states.status();
  ASSERT_EQ(states->size(), 4u);
  const double tolerance = testing::ForwardTolerance(target->config(), t, testing::UnitRoundoff(at::kFloat));
  for (const auto& [index, layer] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {2, -1}, {3, 2}}) {
    const at::Tensor want = Kept(*target, layer), got = (*states)[index][0].cpu();
    EXPECT_LE((got - want).abs().max().item<double>(), tolerance * want.abs().max().item<double>()) << "layer " << layer;
  }
  // Only the diagonal: every row is a one-token forward of its own token.
  auto alone = target->ForwardTrainingLayers(target->Embed(tokens).unsqueeze(0), positions,
                                             at::eye(t, tokens.options().dtype(at::kBool)), {-1});
  ASSERT_TRUE(alone.ok()) << alone.status();
  for (int64_t i : {0, 3, 6}) {
    auto one = target->ForwardTrainingLayers(target->Embed(tokens.narrow(0, i, 1)).unsqueeze(0),
                                             positions.narrow(0, i, 1), at::ones({1, 1}, causal.options()), {-1});
    ASSERT_TRUE(one.ok()) << one.status();
    const at::Tensor want = (*one)[0][0][0].cpu(), got = (*alone)[0][0][i].cpu();
    EXPECT_LE((got - want).abs().max().item<double>(), tolerance * want.abs().max().item<double>()) << "row " << i;
  }
  auto bad = target->ForwardTrainingLayers(target->Embed(tokens).unsqueeze(0), positions, causal.narrow(0, 0, 3), {-1});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("a mask [R, R]"), absl::string_view::npos) << bad.status();
  EXPECT_EQ(target->ForwardTrainingLayers(target->Embed(tokens).unsqueeze(0), positions, causal, {4}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A model of every target layer is the target: same tensors, same logits.
TEST(ShareLayersTest, SharesTheTargetsTensors) {
  auto target = Target(false);
  auto all = LlamaModel::ShareLayers(*target, {0, 1, 2}, /*kv_capacity=*/32);
  ASSERT_TRUE(all.ok()) << all.status();
  const auto mine = (*all)->NamedParameters();
  const auto theirs = target->NamedParameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(mine[i].first, theirs[i].first);
    EXPECT_EQ(mine[i].second.data_ptr(), theirs[i].second.data_ptr()) << mine[i].first;
  }
  EXPECT_TRUE(at::equal(FeedTokens(**all).cpu(), FeedTokens(*target).cpu()));
  EXPECT_EQ((*all)->capacity(), 32);

  // Skipping a layer (Draft & Verify) or exiting early (LayerSkip) is a smaller model.
  auto skip = LlamaModel::ShareLayers(*target, {0, 2}, 32);
  ASSERT_TRUE(skip.ok()) << skip.status();
  EXPECT_EQ((*skip)->config().num_hidden_layers, 2);
  EXPECT_EQ((*skip)->NamedParameters()[1].second.data_ptr(), target->NamedParameters()[1].second.data_ptr());
  EXPECT_EQ(FeedTokens(**skip).sizes(), (std::vector<int64_t>{7, 64}));

  EXPECT_EQ(LlamaModel::ShareLayers(*target, {3}, 32).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LlamaModel::ShareLayers(*target, {}, 32).status().code(), absl::StatusCode::kInvalidArgument);
}

// Shared layers then new ones: the first are the target's tensors, the new
// are drawn as WithNewLayers draws them, and the ends are the target's.
TEST(ShareLayersTest, ThenNewLayersAddAdaptersOnTop) {
  auto target = Target(false);
  auto both = LlamaModel::ShareLayersThenNew(*target, {0, 1}, 1, /*kv_capacity=*/32, /*seed=*/5);
  auto fresh = LlamaModel::WithNewLayers(*target, 1, /*kv_capacity=*/32, /*seed=*/5);
  ASSERT_TRUE(both.ok() && fresh.ok()) << both.status();
  EXPECT_EQ((*both)->config().num_hidden_layers, 3);
  std::map<std::string, at::Tensor> mine, theirs, news;
  for (const auto& [name, t] : (*both)->NamedParameters()) mine[name] = t;
  for (const auto& [name, t] : target->NamedParameters()) theirs[name] = t;
  for (const auto& [name, t] : (*fresh)->NamedParameters()) news[name] = t;
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight",
                           "model.embed_tokens.weight", "model.norm.weight"})
    EXPECT_EQ(mine.at(name).data_ptr(), theirs.at(name).data_ptr()) << name;
  for (const char* part : {"self_attn.q_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight"}) {
    const at::Tensor added = mine.at(std::string("model.layers.2.") + part);
    EXPECT_NE(added.data_ptr(), theirs.at(std::string("model.layers.2.") + part).data_ptr()) << part;
    EXPECT_TRUE(at::equal(added, news.at(std::string("model.layers.0.") + part))) << part;
  }
  EXPECT_EQ(FeedTokens(**both).sizes(), (std::vector<int64_t>{7, 64}));
  EXPECT_EQ(LlamaModel::ShareLayersThenNew(*target, {}, 0, 32, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LlamaModel::ShareLayersThenNew(*target, {3}, 1, 32, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace speclab
