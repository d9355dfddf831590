#include "framework/model/llama_model.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/file_util.h"
#include "framework/core/token_tree.h"
#include "framework/device/chain_rounds.h"
#include "framework/device/device_length_stop.h"
#include "framework/model/model_config.h"
#include "framework/model/safetensors.h"
#include "framework/sampling.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/float_tolerance.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;

// --- Helpers -----------------------------------------------------------------

// CPU unless SPECLAB_TEST_DEVICE=cuda (scripts/gpu_run.sh), always float32.
using ::speclab::testing::TestDevice;

ModelConfig SmallConfig(const std::string& model_type = "llama") {
  ModelConfig c;
  c.model_type = model_type;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-5;
  c.attention_bias = model_type == "qwen2";
  return c;
}

// The model variants every behavioural test runs on.
struct Variant {
  std::string name;
  ModelConfig config;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

std::vector<Variant> Variants() {
  ModelConfig llama3 = SmallConfig();
  llama3.rope_theta = 500000.0;
  llama3.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 16};
  ModelConfig tied = SmallConfig();
  tied.tie_word_embeddings = true;
  tied.num_key_value_heads = 4;  // plain multi-head attention
  ModelConfig linear = SmallConfig();
  linear.rope_scaling.type = "linear";
  linear.rope_scaling.factor = 2.0;
  ModelConfig mistral = SmallConfig("mistral");
  mistral.sliding_window = 4;  // shorter than the test sequences, so it matters
  ModelConfig llama_bias = SmallConfig();
  llama_bias.attention_bias = true;  // q, k, v and o biases
  ModelConfig mqa = SmallConfig("qwen2");
  mqa.num_key_value_heads = 1;
  return {{"llama", SmallConfig()}, {"llama3_rope", llama3}, {"tied_mha", tied}, {"linear_rope", linear},
          {"qwen2_bias", SmallConfig("qwen2")}, {"mistral_window", mistral}, {"qwen2_mqa", mqa},
          {"llama_bias", llama_bias}};
}

std::unique_ptr<LlamaModel> MakeModel(const ModelConfig& config, int64_t capacity = 64, uint64_t seed = 7) {
  auto model = LlamaModel::CreateRandom(config, TestDevice(), at::kFloat, capacity, seed);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

at::Tensor Longs(const std::vector<int64_t>& values) { return at::tensor(values, at::kLong).to(TestDevice()); }

std::vector<int64_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> out(n);
  for (auto& t : out) t = static_cast<int64_t>(rng() % vocab);
  return out;
}

// Mask for a chain of n new tokens after `tentative` earlier tentative slots
// that the chain may see (all of them when see_tentative).
at::Tensor ChainMask(int64_t n, int64_t tentative = 0, bool see_tentative = true) {
  at::Tensor mask = at::ones({n, n}, at::kBool).tril();
  if (tentative > 0) mask = at::cat({at::full({n, tentative}, see_tentative, at::kBool), mask}, 1);
  return mask.to(TestDevice());
}

// Feeds `tokens` as one causal chain after the current cache contents.
at::Tensor FeedChain(LanguageModel& model, const std::vector<int64_t>& tokens) {
  const int64_t start = model.committed_length() + model.tentative_length();
  auto logits = model.Forward(Longs(tokens),
                              at::arange(start, start + static_cast<int64_t>(tokens.size()), at::kLong).to(TestDevice()),
                              ChainMask(tokens.size(), model.tentative_length()));
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : at::Tensor();
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

// max |a - b| / max |b|: logits are compared relative to their scale.
double RelError(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const at::Tensor ca = a.cpu();
  const at::Tensor cb = b.cpu();
  const double scale = cb.abs().max().item<double>();
  return (ca - cb).abs().max().item<double>() / std::max(scale, 1e-30);
}

TokenTree RandomTree(int32_t root, int size, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  TokenTree tree(root);
  while (tree.size() < size) {
    const int parent = static_cast<int>(rng() % tree.size());
    tree.AddNode(parent, static_cast<int32_t>(rng() % vocab));
  }
  return tree;
}

at::Tensor TreeMask(const TokenTree& tree) {
  const std::vector<uint8_t> mask = tree.AncestorMask();
  return at::tensor(at::ArrayRef<uint8_t>(mask)).to(at::kBool).view({tree.size(), tree.size()}).to(TestDevice());
}

std::vector<int64_t> ToInt64(const std::vector<int32_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); }

std::vector<int64_t> Concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string TempDir(const std::string& name) {
  static int counter = 0;
  const fs::path dir =
      fs::path(::testing::TempDir()) / absl::StrCat("speclab_llama_", ::getpid(), "_", counter++, "_", name);
  RemoveTree((dir).string());
  fs::create_directories(dir);
  return dir.string();
}

void WriteFile(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool Contains(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != absl::string_view::npos;
}

// Two float32 forwards of the test models agree within the first-order bound
// of their reductions (tests/support/float_tolerance.h) at the longest context
// the tests attend to, on any device and in any summation order.
const double kTol =
    testing::ForwardTolerance(SmallConfig(), SmallConfig().max_position_embeddings, testing::UnitRoundoff(at::kFloat));

// --- Behaviour on every variant ------------------------------------------------

class LlamaVariantTest : public ::testing::TestWithParam<Variant> {};

INSTANTIATE_TEST_SUITE_P(Llama, LlamaVariantTest, ::testing::ValuesIn(Variants()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

TEST_P(LlamaVariantTest, KvCompactionEqualsRecompute) {
  const ModelConfig& config = GetParam().config;
  const std::vector<int64_t> prompt = RandomTokens(7, config.vocab_size, 1);
  const std::vector<int64_t> context(prompt.begin(), prompt.end() - 1);
  auto model = MakeModel(config);
  FeedChain(*model, context);
  ASSERT_TRUE(model->Commit(Iota(context.size())).ok());

  // The tree's root is the last prompt token, not yet fed.
  const TokenTree tree = RandomTree(static_cast<int32_t>(prompt.back()), 12, config.vocab_size, 2);
  const int64_t base = model->committed_length();
  auto tree_logits = model->Forward(Longs(ToInt64(tree.tokens())), Longs(tree.Positions(base)), TreeMask(tree));
  ASSERT_TRUE(tree_logits.ok()) << tree_logits.status();
  const std::vector<int> leaves = tree.Leaves();
  const int leaf = leaves[leaves.size() / 2];
  const std::vector<int> path = tree.PathTo(leaf);
  ASSERT_GE(path.size(), 2u);
  ASSERT_TRUE(model->Commit(std::vector<int64_t>(path.begin(), path.end())).ok());
  EXPECT_EQ(model->committed_length(), base + static_cast<int64_t>(path.size()));
  EXPECT_EQ(model->tentative_length(), 0);
  const int64_t next = 5;
  const at::Tensor after = FeedChain(*model, {next});

  auto fresh = MakeModel(config);
  const std::vector<int64_t> chain = Concat(Concat(context, ToInt64(tree.PathTokens(leaf))), {next});
  const at::Tensor reference = FeedChain(*fresh, chain);
  EXPECT_LT(RelError(after, reference.narrow(0, chain.size() - 1, 1)), kTol);
}

TEST_P(LlamaVariantTest, TreeLogitsEqualSequentialPaths) {
  const ModelConfig& config = GetParam().config;
  const std::vector<int64_t> context = RandomTokens(6, config.vocab_size, 3);
  const TokenTree tree = RandomTree(11, 10, config.vocab_size, 4);
  auto model = MakeModel(config);
  FeedChain(*model, context);
  ASSERT_TRUE(model->Commit(Iota(context.size())).ok());
  const int64_t base = model->committed_length();

  // Fed in two parts, so the second part attends to tentative slots of the first.
  const at::Tensor tokens = Longs(ToInt64(tree.tokens()));
  const at::Tensor positions = Longs(tree.Positions(base));
  const at::Tensor mask = TreeMask(tree);
  const int64_t first = 4;
  const int64_t rest = tree.size() - first;
  auto logits_a = model->Forward(tokens.narrow(0, 0, first), positions.narrow(0, 0, first),
                                 mask.narrow(0, 0, first).narrow(1, 0, first));
  ASSERT_TRUE(logits_a.ok()) << logits_a.status();
  auto logits_b = model->Forward(tokens.narrow(0, first, rest), positions.narrow(0, first, rest),
                                 mask.narrow(0, first, rest));
  ASSERT_TRUE(logits_b.ok()) << logits_b.status();
  const at::Tensor tree_logits = at::cat({*logits_a, *logits_b}, 0);
  EXPECT_EQ(model->HiddenStates(-1)->sizes(), (std::vector<int64_t>{rest, config.hidden_size}));

  auto reference = MakeModel(config);
  FeedChain(*reference, context);
  ASSERT_TRUE(reference->Commit(Iota(context.size())).ok());
  for (int node = 0; node < tree.size(); ++node) {
    const at::Tensor path_logits = FeedChain(*reference, ToInt64(tree.PathTokens(node)));
    EXPECT_LT(RelError(tree_logits[node], path_logits[path_logits.size(0) - 1]), kTol) << "node " << node;
    ASSERT_TRUE(reference->Truncate(base).ok());  // drops the tentative path
  }
}

TEST_P(LlamaVariantTest, IncrementalDecodingEqualsPrefill) {
  const ModelConfig& config = GetParam().config;
  const std::vector<int64_t> tokens = RandomTokens(12, config.vocab_size, 5);
  auto prefill_model = MakeModel(config);
  const at::Tensor prefill = FeedChain(*prefill_model, tokens);
  auto model = MakeModel(config);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const at::Tensor step = FeedChain(*model, {tokens[i]});
    EXPECT_LT(RelError(step[0], prefill[i]), kTol) << "token " << i;
    ASSERT_TRUE(model->Commit({0}).ok());
  }
  EXPECT_EQ(model->committed_length(), static_cast<int64_t>(tokens.size()));
}

TEST_P(LlamaVariantTest, SaveLoadRoundTripGivesIdenticalLogits) {
  const ModelConfig& config = GetParam().config;
  const std::vector<int64_t> tokens = RandomTokens(9, config.vocab_size, 6);
  auto model = MakeModel(config);
  const std::string dir = TempDir("round_trip");
  ASSERT_TRUE(model->Save(dir, at::kFloat).ok());
  auto loaded = LlamaModel::Load(dir, TestDevice(), at::kFloat, 64);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const ModelConfig& c = (*loaded)->config();
  EXPECT_EQ(c.model_type, config.model_type);
  EXPECT_EQ(c.tie_word_embeddings, config.tie_word_embeddings);
  EXPECT_EQ(c.attention_bias, config.attention_bias);
  EXPECT_EQ(c.sliding_window, config.sliding_window);
  EXPECT_EQ(c.rope_scaling.type, config.rope_scaling.type);
  EXPECT_EQ(c.rope_theta, config.rope_theta);
  EXPECT_TRUE(at::equal(FeedChain(**loaded, tokens), FeedChain(*model, tokens)));
}

TEST_P(LlamaVariantTest, ForwardTrainingMatchesForwardAndHasGradients) {
  const ModelConfig& config = GetParam().config;
  auto model = MakeModel(config);
  const std::vector<int64_t> a = RandomTokens(10, config.vocab_size, 8);
  const std::vector<int64_t> b = RandomTokens(10, config.vocab_size, 9);
  for (auto& [name, param] : model->NamedParameters()) param.set_requires_grad(true);

  const at::Tensor logits = model->ForwardTraining(at::stack({Longs(a), Longs(b)}));
  ASSERT_TRUE(logits.defined());
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 10, config.vocab_size}));
  EXPECT_LT(RelError(logits[0].detach(), FeedChain(*model, a)), kTol);
  ASSERT_TRUE(model->Truncate(0).ok());
  EXPECT_LT(RelError(logits[1].detach(), FeedChain(*model, b)), kTol);

  logits.pow(2).sum().backward();
  for (const auto& [name, param] : model->NamedParameters()) {
    ASSERT_TRUE(param.grad().defined()) << name;
    EXPECT_GT(param.grad().abs().sum().item<double>(), 0.0) << name;
  }
}

// --- Single-configuration behaviour ---------------------------------------------

TEST(LlamaModelTest, TruncateRollsBack) {
  const ModelConfig config = SmallConfig();
  const std::vector<int64_t> a = RandomTokens(8, config.vocab_size, 10);
  const std::vector<int64_t> b = RandomTokens(4, config.vocab_size, 11);
  const std::vector<int64_t> c = RandomTokens(3, config.vocab_size, 12);
  auto model = MakeModel(config);
  FeedChain(*model, a);
  ASSERT_TRUE(model->Commit(Iota(a.size())).ok());
  FeedChain(*model, b);
  ASSERT_TRUE(model->Commit(Iota(b.size())).ok());
  FeedChain(*model, {1, 2});  // tentative, dropped by Truncate too
  ASSERT_TRUE(model->Truncate(8).ok());
  EXPECT_EQ(model->committed_length(), 8);
  EXPECT_EQ(model->tentative_length(), 0);
  const at::Tensor after = FeedChain(*model, c);

  auto fresh = MakeModel(config);
  const at::Tensor reference = FeedChain(*fresh, Concat(a, c)).narrow(0, a.size(), c.size());
  EXPECT_LT(RelError(after, reference), kTol);

  const absl::Status bad = model->Truncate(9);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(model->Truncate(0).ok());
}

TEST(LlamaModelTest, CommitKeepsSparseSlotsInOrder) {
  // Tentative chain a b c d e with each token seeing only the kept ones
  // before it; committing {1, 3, 4} must equal the chain b d e.
  const ModelConfig config = SmallConfig();
  auto model = MakeModel(config);
  const std::vector<int64_t> prefix = {3, 4, 5};
  FeedChain(*model, prefix);
  ASSERT_TRUE(model->Commit(Iota(3)).ok());
  const std::vector<int64_t> kept = {10, 11, 12};
  // Slots: 0 = x (dropped), 1 = kept[0], 2 = y (dropped), 3 = kept[1], 4 = kept[2].
  const at::Tensor tokens = Longs({20, kept[0], 21, kept[1], kept[2]});
  const at::Tensor positions = Longs({3, 3, 4, 4, 5});
  at::Tensor mask = at::eye(5, at::kBool);
  mask[3][1] = true;
  mask[4][1] = true;
  mask[4][3] = true;
  mask[2][0] = true;
  ASSERT_TRUE(model->Forward(tokens, positions, mask.to(TestDevice())).ok());
  ASSERT_TRUE(model->Commit({1, 3, 4}).ok());
  const at::Tensor after = FeedChain(*model, {7});

  auto fresh = MakeModel(config);
  const at::Tensor reference = FeedChain(*fresh, {3, 4, 5, 10, 11, 12, 7});
  EXPECT_LT(RelError(after, reference.narrow(0, 6, 1)), kTol);
}

TEST(LlamaModelTest, StaticShapeForwardEqualsPlainForward) {
  // The padded, bucketed forward that CUDA graphs replay (eager on the CPU)
  // must give the plain forward's logits through a whole decoding pattern:
  // a prefill, trees of odd sizes (padding rows), sparse commits, truncation,
  // and KV lengths on both sides of a 256-slot bucket boundary.
  for (const Variant& variant : Variants()) {
    SCOPED_TRACE(variant.name);
    auto plain = MakeModel(variant.config, 320);
    auto padded = MakeModel(variant.config, 320);
    plain->EnableCudaGraphs(false);
    padded->EnableCudaGraphs(true);
    auto both = [&](const std::function<at::Tensor(LlamaModel&)>& step) {
      const at::Tensor a = step(*plain), b = step(*padded);
      EXPECT_LT(RelError(b, a), kTol);
      EXPECT_EQ(plain->committed_length(), padded->committed_length());
    };
    both([](LlamaModel& m) { return FeedChain(m, RandomTokens(250, 64, 1)); });
    ASSERT_TRUE(plain->Commit(Iota(250)).ok());
    ASSERT_TRUE(padded->Commit(Iota(250)).ok());
    // Capturing every shape up front (CUDA) must leave the cache as it was.
    ASSERT_TRUE(padded->PrepareForDecoding(16).ok());
    for (int step = 0; step < 6; ++step) {
      const TokenTree tree = RandomTree(5, 3 + 2 * step, 64, 40 + step);
      const at::Tensor tokens = Longs(ToInt64(tree.tokens()));
      const std::vector<int64_t> host_positions = tree.Positions(plain->committed_length());
      both([&](LlamaModel& m) { return *m.Forward(tokens, Longs(host_positions), TreeMask(tree)); });
      // A second forward in the same step sees the tree as tentative slots.
      both([&](LlamaModel& m) { return FeedChain(m, {9, 10}); });
      std::vector<int64_t> keep{0};
      for (int node = 1; node < tree.size() && keep.size() < 3; node += 2) keep.push_back(node);
      ASSERT_TRUE(plain->Commit(keep).ok());
      ASSERT_TRUE(padded->Commit(keep).ok());
    }
    ASSERT_TRUE(plain->Truncate(240).ok());
    ASSERT_TRUE(padded->Truncate(240).ok());
    both([](LlamaModel& m) { return FeedChain(m, {1, 2, 3}); });
  }
}

// Greedy, or the exponential race on softmax(logits) with the chain's noise.
ChainPick TestPick(bool greedy, at::Generator* generator) {
  if (greedy)
    return ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
      return std::make_pair(GreedyTokens(logits), at::Tensor());
    });
  return ChainPick::Of(
      [](const std::tuple<>&, const at::Tensor& logits, const at::Tensor& noise) {
        const at::Tensor q = logits.softmax(-1);
        return std::make_pair(RaceRows(q, noise), q);
      },
      std::tuple<>{}, generator);
}

// Fills `model` to a 256-slot KV bucket's edge: 250 committed tokens and one
// tentative slot (token 9) that what follows must see. Forward counts start
// from there.
void FillToBucketEdge(LlamaModel& model) {
  FeedChain(model, RandomTokens(250, 64, 1));
  ASSERT_TRUE(model.Commit(Iota(250)).ok());
  FeedChain(model, {9});
  model.ResetForwardCounts();
}

// Runs `check` on two models of every variant filled to the bucket edge, the
// subject with static shapes off and on: the reference runs the plain forward.
void ForEachPairAtBucketEdge(
    const std::function<void(const Variant&, bool static_shapes, LlamaModel* reference, LlamaModel* subject)>& check) {
  for (const Variant& variant : Variants()) {
    for (bool static_shapes : {false, true}) {
      SCOPED_TRACE(variant.name + (static_shapes ? " static" : " plain"));
      auto reference = MakeModel(variant.config, 320);
      auto subject = MakeModel(variant.config, 320);
      reference->EnableCudaGraphs(false);
      subject->EnableCudaGraphs(static_shapes);
      ASSERT_NO_FATAL_FAILURE(FillToBucketEdge(*reference));
      ASSERT_NO_FATAL_FAILURE(FillToBucketEdge(*subject));
      check(variant, static_shapes, reference.get(), subject.get());
    }
  }
}

// One random model twice: [0] with CUDA graphs off, whose chains are
// LanguageModel's default (one Forward() a step), [1] with them on (the
// chain body: a graph on CUDA, eager with static shapes on the CPU).
std::array<std::unique_ptr<LlamaModel>, 2> PlainAndChained(const ModelConfig& config, int64_t capacity) {
  std::array<std::unique_ptr<LlamaModel>, 2> models = {MakeModel(config, capacity), MakeModel(config, capacity)};
  models[0]->EnableCudaGraphs(false);
  models[1]->EnableCudaGraphs(true);
  return models;
}

TEST(LlamaModelTest, ForwardChainEqualsForwardCalls) {
  // The chain body (a CUDA graph on CUDA, eager on the CPU with static
  // shapes) against LanguageModel's default (one Forward() per step), after
  // a tentative slot, across a 256-slot KV bucket boundary; then the caches
  // must agree for a forward on top of a commit.
  for (const Variant& variant : Variants()) {
    for (bool greedy : {true, false}) {
      SCOPED_TRACE(variant.name + (greedy ? " greedy" : " sampled"));
      const auto models = PlainAndChained(variant.config, 320);
      ChainResult results[2];
      for (int m = 0; m < 2; ++m) {
        LlamaModel& model = *models[m];
        ASSERT_NO_FATAL_FAILURE(FillToBucketEdge(model));
        at::Generator generator = MakeGenerator(TestDevice(), 5);
        auto chain = model.ForwardChain(Longs({4}), 251, 8, TestPick(greedy, &generator));
        ASSERT_TRUE(chain.ok()) << chain.status();
        results[m] = *chain;
        EXPECT_EQ(model.tentative_length(), 9);
        EXPECT_EQ(model.forward_counts(), (std::map<int64_t, int64_t>{{1, 8}}));
      }
      ASSERT_EQ(results[1].tokens.sizes(), (std::vector<int64_t>{9}));
      EXPECT_TRUE(at::equal(results[0].tokens.cpu(), results[1].tokens.cpu()))
          << results[0].tokens << results[1].tokens;
      EXPECT_EQ(results[0].rows.defined(), !greedy);
      // Probabilities: a logit error e scales each by a factor within
      // exp(+-2e), and the random-init logits stay below 1 in magnitude
      // (weights of std 0.02).
      if (!greedy) EXPECT_LT(RelError(results[1].rows, results[0].rows), 2 * kTol);
      for (const auto& model : models) ASSERT_TRUE(model->Commit({0, 1, 2, 3}).ok());
      const at::Tensor a = FeedChain(*models[0], {7, 8}), b = FeedChain(*models[1], {7, 8});
      EXPECT_LT(RelError(b, a), kTol);
    }
  }
}

// A pick that reads the hidden state (ChainPick::OnHidden) gets the final
// norm's output behind each step's logits: the same rows from the chain body
// and from LanguageModel's default (Forward(), then HiddenStates(-1)), each
// row the one whose LM head image picked the chain's next token.
TEST(LlamaModelTest, HiddenPicksReadTheHiddenStateBehindTheLogits) {
  const ChainPick pick =
      ChainPick::OnHidden([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor& hidden, const at::Tensor&) {
        return std::make_pair(GreedyTokens(logits), hidden);
      });
  for (const Variant& variant : Variants()) {
    SCOPED_TRACE(variant.name);
    const auto models = PlainAndChained(variant.config, 320);
    ChainResult results[2];
    for (int m = 0; m < 2; ++m) {
      auto chain = models[m]->ForwardChain(Longs({4}), 0, 6, pick);
      ASSERT_TRUE(chain.ok()) << chain.status();
      results[m] = *chain;
      ASSERT_EQ(results[m].rows.sizes(), (std::vector<int64_t>{6, variant.config.hidden_size}));
      EXPECT_EQ(results[m].rows.scalar_type(), at::kFloat);
      const at::Tensor next = models[m]->LmHead(results[m].rows).argmax(-1);
      EXPECT_TRUE(at::equal(next.cpu(), results[m].tokens.narrow(0, 1, 6).cpu()));
    }
    EXPECT_TRUE(at::equal(results[0].tokens.cpu(), results[1].tokens.cpu()));
    EXPECT_LT(RelError(results[1].rows, results[0].rows), kTol);
  }
  // Feature chains give no hidden states: such a pick is refused, not fed garbage.
  auto model = MakeModel(Variants().front().config, 64);
  const at::Tensor token = Longs({4});
  auto logits = model->Forward(token, Longs({0}), at::Tensor());
  ASSERT_TRUE(logits.ok());
  const at::Tensor feature = model->HiddenStates(-1).value();
  const FeatureRoot root{.token = token, .logits = *logits, .feature = feature, .position = 1};
  EXPECT_THAT(std::string(model->ForwardChainOnFeatures(root, 2, pick, NodeInputs()).status().message()),
              ::testing::HasSubstr("no hidden states"));
}

// Batch-invariant numerics (SetBatchInvariant), CUDA and bf16: a chain fed
// in one forward gives bit for bit the logits of feeding its tokens one at a
// time, at lengths across the GEMV's 16-row slices, with graphs on and off.
TEST(LlamaModelTest, BatchInvariantChainLogitsEqualOneTokenForwards) {
  SPECLAB_SKIP_UNLESS_CUDA();
  const std::vector<int64_t> context = RandomTokens(40, 512, 11);
  const std::vector<int64_t> chain = RandomTokens(20, 512, 12);
  for (bool graphs : {false, true}) {
    auto make = [&]() -> std::unique_ptr<LlamaModel> {
      std::unique_ptr<LlamaModel> model = testing::KernelSizedModel(c10::Device(c10::kCUDA), at::kBFloat16, 3);
      if (model == nullptr) return nullptr;
      model->EnableCudaGraphs(graphs);
      model->SetBatchInvariant(true);
      FeedChain(*model, context);
      EXPECT_TRUE(model->Commit(Iota(context.size())).ok());
      return model;
    };
    auto one_at_a_time = make();
    ASSERT_NE(one_at_a_time, nullptr);
    std::vector<at::Tensor> expected;
    for (int64_t token : chain) {
      expected.push_back(FeedChain(*one_at_a_time, {token})[0].cpu());
      ASSERT_TRUE(one_at_a_time->Commit({0}).ok());
    }
    for (size_t n : {1, 2, 5, 8, 13, 20}) {
      auto together = make();
      ASSERT_NE(together, nullptr);
      const at::Tensor logits =
          FeedChain(*together, std::vector<int64_t>(chain.begin(), chain.begin() + n)).cpu();
      for (size_t i = 0; i < n; ++i)
        EXPECT_TRUE(at::equal(logits[i], expected[i])) << "graphs " << graphs << ", " << n << " tokens, row " << i;
    }
  }
}

// The same for a tree: every node's logits in one forward over the tree, its
// ancestors in tentative slots with siblings between them, equal bit for bit
// those of one-token forwards along its path (the ordered attention kernel).
// The context ends past slot 250, so that the tree straddles the tiled
// kernel's 256-slot chunk boundary too.
TEST(LlamaModelTest, BatchInvariantTreeLogitsEqualOneTokenForwardsAlongThePath) {
  SPECLAB_SKIP_UNLESS_CUDA();
  const std::vector<int64_t> context = RandomTokens(250, 512, 21);
  const TokenTree tree = RandomTree(7, 24, 512, 22);
  auto make = [&](bool graphs) -> std::unique_ptr<LlamaModel> {
    std::unique_ptr<LlamaModel> model = testing::KernelSizedModel(c10::Device(c10::kCUDA), at::kBFloat16, 3);
    if (model == nullptr) return nullptr;
    model->EnableCudaGraphs(graphs);
    model->SetBatchInvariant(true);
    FeedChain(*model, context);
    EXPECT_TRUE(model->Commit(Iota(context.size())).ok());
    return model;
  };
  for (bool graphs : {false, true}) {
    auto together = make(graphs);
    ASSERT_NE(together, nullptr);
    const int64_t base = together->committed_length();
    auto logits = together->Forward(Longs(ToInt64(tree.tokens())), Longs(tree.Positions(base)), TreeMask(tree));
    ASSERT_TRUE(logits.ok()) << logits.status();
    const at::Tensor tree_logits = logits->cpu();
    int compared = 0;
    for (int leaf : tree.Leaves()) {
      auto one_at_a_time = make(graphs);
      ASSERT_NE(one_at_a_time, nullptr);
      for (int node : tree.PathTo(leaf)) {
        const at::Tensor expected = FeedChain(*one_at_a_time, {tree.token(node)})[0].cpu();
        ASSERT_TRUE(one_at_a_time->Commit({0}).ok());
        EXPECT_TRUE(at::equal(tree_logits[node], expected)) << "graphs " << graphs << ", node " << node;
        ++compared;
      }
    }
    EXPECT_GT(compared, tree.size());
  }
}

// Off CUDA the batch-invariant forms are the ATen path: same logits as the
// default forward (to the usual tolerance), and switching drops no state.
TEST(LlamaModelTest, BatchInvariantModeGivesTheSameLogits) {
  const ModelConfig config = SmallConfig();
  const std::vector<int64_t> tokens = RandomTokens(9, config.vocab_size, 13);
  auto plain = MakeModel(config);
  auto invariant = MakeModel(config);
  invariant->SetBatchInvariant(true);
  EXPECT_TRUE(invariant->batch_invariant());
  EXPECT_FALSE(plain->batch_invariant());
  EXPECT_LT(RelError(FeedChain(*invariant, tokens), FeedChain(*plain, tokens)), kTol);
}

TEST(LlamaModelTest, ForwardChainErrors) {
  auto model = MakeModel(SmallConfig(), 16);
  model->EnableCudaGraphs(true);
  const ChainPick pick = TestPick(true, nullptr);
  EXPECT_FALSE(model->ForwardChain(Longs({1, 2}), 0, 2, pick).ok());
  EXPECT_FALSE(model->ForwardChain(Longs({1}), 0, 0, pick).ok());
  auto full = model->ForwardChain(Longs({1}), 0, 17, pick);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  const ChainPick broken = ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
    return std::make_pair(logits.view({-1, 3}).argmax(-1), at::Tensor());  // 64 % 3 != 0
  });
  for (bool padded : {false, true}) {
    model->EnableCudaGraphs(padded);
    auto result = model->ForwardChain(Longs({1}), 0, 2, broken);
    EXPECT_FALSE(result.ok()) << "padded " << padded;
    ASSERT_TRUE(model->Truncate(0).ok());
  }
}

TEST(LlamaModelTest, DevicePositionedForwardsEqualHostPositionedOnes) {
  // ForwardAt and ForwardChainAt (the start on the device, a larger host
  // bound that picks another KV bucket) against Forward() and ForwardChain()
  // at the same place, after a tentative slot they must see; then the caches
  // must agree once truncated to the true length. Static shapes off: the
  // default that reads start back; on: slots, positions and mask on the device.
  ForEachPairAtBucketEdge([](const Variant& variant, bool static_shapes, LlamaModel* reference, LlamaModel* subject) {
    const at::Tensor expected = FeedChain(*reference, {4, 5, 6});
    auto actual = subject->ForwardAt(Longs({4, 5, 6}), {.start = Longs({251}), .max_start = 260});
    ASSERT_TRUE(actual.ok()) << actual.status();
    EXPECT_LT(RelError(*actual, expected), kTol);
    EXPECT_EQ(subject->tentative_length(), 0);
    EXPECT_GE(subject->committed_length(), 254);
    EXPECT_EQ(subject->forward_counts(), (std::map<int64_t, int64_t>{{3, 1}}));

    // A chain whose first forward re-feeds token 4 at 251, where it already
    // is: the same picks as a chain from token 5 at 252.
    ASSERT_TRUE(reference->Commit({0, 1, 2}).ok());
    ASSERT_TRUE(reference->Truncate(252).ok());
    const ChainPick pick = TestPick(/*greedy=*/true, nullptr);
    auto expected_chain = reference->ForwardChain(Longs({5}), 252, 5, pick);
    ASSERT_TRUE(expected_chain.ok());
    subject->ResetForwardCounts();
    auto chain = subject->ForwardChainAt(Longs({4, 5}), {.start = Longs({251}), .max_start = 300}, 5, pick);
    ASSERT_TRUE(chain.ok()) << chain.status();
    ASSERT_EQ(chain->tokens.sizes(), (std::vector<int64_t>{7}));
    EXPECT_TRUE(at::equal(chain->tokens.narrow(0, 1, 6).cpu(), expected_chain->tokens.cpu()))
        << chain->tokens << expected_chain->tokens;
    const bool chain_graph = static_shapes && variant.config.sliding_window == 0;
    EXPECT_EQ(subject->forward_counts(), chain_graph ? (std::map<int64_t, int64_t>{{2, 1}, {1, 4}})
                                                       : (std::map<int64_t, int64_t>{{1, 6}}));
    ASSERT_TRUE(reference->Commit(Iota(5)).ok());
    ASSERT_TRUE(subject->Truncate(257).ok());
    EXPECT_LT(RelError(FeedChain(*subject, {7, 8}), FeedChain(*reference, {7, 8})), kTol);
  });
}

// A length policy's stop for tests: after each draft whose token (the pick
// keeps it as the facts' first column, StoppedPick) is even.
class EvenTokenStop final : public DeviceLengthStop {
 public:
  at::Tensor Stops(const DeviceDraftFacts& facts) const override {
    return facts.draft_probability.to(at::kLong).remainder(2) == 0;
  }
};

// A greedy pick whose rows are facts: the token, then two zeros.
ChainPick StoppedPick(const DeviceLengthStop& stop) {
  return ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
           const at::Tensor token = GreedyTokens(logits);
           return std::make_pair(token, at::cat({token.to(at::kFloat).reshape({1, 1}),
                                                 at::zeros({1, 2}, logits.options().dtype(at::kFloat))}, 1));
         })
      .StoppedBy(stop, {.columns = 3});
}

TEST(LlamaModelTest, StoppedChainsKeepThePicksUpToTheStop) {
  // A chain StoppedBy a stop: the same picks as the chain without it up to
  // the first stop, and that many kept. A CUDA graph skips the forwards past
  // the stop (conditional nodes) and counts only those that ran; elsewhere
  // every step runs and counts.
  const EvenTokenStop stop;
  ForEachPairAtBucketEdge([&](const Variant& variant, bool static_shapes, LlamaModel* reference, LlamaModel* subject) {
    ASSERT_TRUE(reference->Commit({0}).ok());
    const ChainPick pick = StoppedPick(stop);
    auto expected = reference->ForwardChain(Longs({5}), 251, 6, pick);
    ASSERT_TRUE(expected.ok()) << expected.status();
    const at::Tensor drafts = expected->tokens.narrow(0, 1, 6).cpu();
    int64_t kept = 6;
    for (int64_t i = 0; i < 6; ++i)
      if (drafts[i].item<int64_t>() % 2 == 0) {
        kept = i + 1;
        break;
      }
    ASSERT_EQ(expected->kept.cpu().item<int64_t>(), kept);
    auto chain = subject->ForwardChainAt(Longs({5}), {.start = Longs({251}), .max_start = 300}, 6, pick);
    ASSERT_TRUE(chain.ok()) << chain.status();
    ASSERT_TRUE(chain->kept.defined());
    EXPECT_EQ(chain->kept.cpu().item<int64_t>(), kept);
    EXPECT_TRUE(at::equal(chain->tokens.narrow(0, 1, kept).cpu(), drafts.narrow(0, 0, kept)))
        << chain->tokens << drafts;
    EXPECT_TRUE(at::equal(chain->rows.narrow(0, 0, kept).cpu(), expected->rows.narrow(0, 0, kept).cpu()));
    const bool skips = subject->device().is_cuda() && static_shapes && variant.config.sliding_window == 0;
    EXPECT_EQ(subject->forward_counts(), (std::map<int64_t, int64_t>{{1, skips ? kept : 6}})) << "kept " << kept;
  });
}

// A guess for tests that reads `oracle` (int64 by position) after the root,
// not the sequence: where the oracle holds a chain's own tokens, every guess
// of that chain hits.
ChainGuess OracleGuess(const at::Tensor& oracle, int64_t count) {
  return ChainGuess::Of(
      count,
      [](const std::tuple<at::Tensor>& params, const at::Tensor&, const at::Tensor& root, int64_t count) {
        return std::get<0>(params).index_select(0, root + 1 + at::arange(count, root.options()));
      },
      std::make_tuple(oracle));
}

TEST(LlamaModelTest, ChainsInRoundsAreThePlainChainInFewerForwards) {
  // ForwardChainInRoundsAt against ForwardChainAt from the same place with
  // the same noise: the same tokens and rows whatever the guesses, in one
  // forward of the prefix and two guesses, then one of three tokens a round:
  // one more round where every guess hits (three picks a round), five where
  // none does, two where the fourth pick's guess misses; and the chain's
  // slots hold what the plain chain's do.
  constexpr int64_t kSteps = 6, kGuesses = 2;
  ForEachPairAtBucketEdge([&](const Variant& variant, bool static_shapes, LlamaModel* reference, LlamaModel* subject) {
    for (LlamaModel* model : {reference, subject}) ASSERT_TRUE(model->Commit({0}).ok());  // token 9 at 250
    const at::Tensor prefix = Longs({4, 5});
    const DevicePosition at{.start = Longs({251}), .max_start = 300};
    const at::Tensor context =
        at::cat({Longs(RandomTokens(250, 64, 1)), Longs({9}), at::zeros({100}, prefix.options())});
    for (bool greedy : {true, false}) {
      SCOPED_TRACE(greedy ? "greedy" : "sampled");
      at::Generator reference_noise = MakeGenerator(TestDevice(), 11);
      ASSERT_TRUE(reference->Truncate(251).ok());
      auto expected = reference->ForwardChainAt(prefix, at, kSteps, TestPick(greedy, &reference_noise));
      ASSERT_TRUE(expected.ok()) << expected.status();
      ASSERT_TRUE(reference->Truncate(258).ok());
      const at::Tensor after_chain = FeedChain(*reference, {7, 8});
      at::Tensor right = at::zeros({400}, prefix.options());
      right.narrow(0, 251, 2 + kSteps).copy_(expected->tokens);
      at::Tensor fourth_wrong = right.clone();
      fourth_wrong.narrow(0, 256, 1).add_(1);
      fourth_wrong.narrow(0, 256, 1).remainder_(variant.config.vocab_size);
      const std::vector<std::tuple<std::string, at::Tensor, int64_t>> cases = {
          {"every guess right", right, 1},
          {"every guess wrong", at::remainder(right + 1, variant.config.vocab_size), 5},
          {"the fourth wrong", fourth_wrong, 2}};
      for (const auto& [name, oracle, later_rounds] : cases) {
        for (bool row_wise : {false, true}) {
          SCOPED_TRACE(absl::StrCat(name, row_wise ? ", a row-wise pick" : ""));
          ASSERT_TRUE(subject->Truncate(251).ok());
          subject->ResetForwardCounts();
          at::Generator noise = MakeGenerator(TestDevice(), 11);
          const ChainPick pick = row_wise ? TestPick(greedy, &noise).RowWise() : TestPick(greedy, &noise);
          auto chain =
              subject->ForwardChainInRoundsAt(prefix, at, kSteps, pick, OracleGuess(oracle, kGuesses), context);
          ASSERT_TRUE(chain.ok()) << chain.status();
          EXPECT_TRUE(at::equal(chain->tokens.cpu(), expected->tokens.cpu())) << chain->tokens << expected->tokens;
          ASSERT_EQ(chain->rows.defined(), !greedy);
          // The rows' tolerance as ForwardChainEqualsForwardCalls'.
          if (!greedy) EXPECT_LT(RelError(chain->rows, expected->rows), 2 * kTol);
          EXPECT_EQ(subject->forward_counts(),
                    (std::map<int64_t, int64_t>{{2 + kGuesses, 1}, {1 + kGuesses, later_rounds}}));
          ASSERT_TRUE(subject->Truncate(258).ok());
          EXPECT_LT(RelError(FeedChain(*subject, {7, 8}), after_chain), kTol);
        }
      }
    }
  });
}

TEST(LlamaModelTest, ChainsInRoundsRefuseStopsAndBadGuesses) {
  const EvenTokenStop stop;
  for (bool static_shapes : {false, true}) {
    auto model = MakeModel(SmallConfig(), 64);
    model->EnableCudaGraphs(static_shapes);
    const at::Tensor oracle = at::zeros({200}, Longs({0}).options());
    const DevicePosition at{.start = Longs({0}), .max_start = 0};
    auto stopped =
        model->ForwardChainInRoundsAt(Longs({1, 2}), at, 4, StoppedPick(stop), OracleGuess(oracle, 2), oracle);
    EXPECT_EQ(stopped.status().code(), absl::StatusCode::kUnimplemented) << stopped.status();
    auto too_many = model->ForwardChainInRoundsAt(Longs({1, 2}), at, 4, TestPick(true, nullptr),
                                                  OracleGuess(oracle, kMaxGuessesPerRound + 1), oracle);
    EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument) << too_many.status();
    const ChainGuess wrong_shape =
        ChainGuess::Of(2, [](const std::tuple<>&, const at::Tensor& sequence, const at::Tensor&, int64_t count) {
          return sequence.narrow(0, 0, count + 1);
        });
    auto shaped = model->ForwardChainInRoundsAt(Longs({1, 2}), at, 4, TestPick(true, nullptr), wrong_shape, oracle);
    EXPECT_FALSE(shaped.ok());
    EXPECT_THAT(std::string(shaped.status().message()), ::testing::HasSubstr("int64 [2]"));
  }
}

// A LevelPick for tests, two nodes a level (a `width` that claims otherwise
// serves the error tests): level 1 is the prefix's two best tokens; after that
// child i extends node 1 - i with that node's greedy token. The carry sums
// each node's path of best logits.
LevelPick MirrorPick(int64_t width = 2) {
  return LevelPick::Of(
      width, [](const std::tuple<>&, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) {
            const auto longs = logits.options().dtype(at::kLong);
            if (level == 0) {
              auto [best, tokens] = logits[0].topk(2);
              return LevelPick::Choice{.tokens = tokens, .parents = at::zeros({2}, longs), .carry = {best},
                                       .kept = {tokens}};
            }
            const at::Tensor parents = at::arange(1, -1, -1, longs);
            const at::Tensor sums = carry[0] + std::get<0>(logits.max(-1));
            return LevelPick::Choice{.tokens = GreedyTokens(logits).index_select(0, parents),
                                     .parents = parents,
                                     .carry = {sums.index_select(0, parents)},
                                     .kept = {GreedyTokens(logits), sums}};
      });
}

TEST(LlamaModelTest, ForwardLevelsEqualsForwardsWithAncestorMasks) {
  // A two-token prefix, then three levels of two nodes, each level's nodes
  // extending the previous level's in mirror order, against Forward() calls
  // with hand-built masks: a node sees the slots before the levels, its
  // ancestors and itself. Static shapes off: the default; on: one graph (the
  // same body eagerly on the CPU). The levels cross a KV bucket's edge; the
  // caches must agree afterwards.
  ForEachPairAtBucketEdge([](const Variant& variant, bool static_shapes, LlamaModel* reference, LlamaModel* subject) {
    // Tentative columns: the slot before, the prefix (two), then a0 a1 | b0 b1 | c0 c1,
    // where b0 extends a1, b1 extends a0, c0 extends b1 and c1 extends b0.
    const std::vector<std::vector<int64_t>> masks[3] = {
        {{1, 1, 1, 1, 0}, {1, 1, 1, 0, 1}},
        {{1, 1, 1, 0, 1, 1, 0}, {1, 1, 1, 1, 0, 0, 1}},
        {{1, 1, 1, 1, 0, 0, 1, 1, 0}, {1, 1, 1, 0, 1, 1, 0, 0, 1}}};
    const at::Tensor prefix_logits = FeedChain(*reference, {4, 5});
    auto [best, first] = prefix_logits[1].topk(2);
    std::vector<int64_t> tokens{first[0].item<int64_t>(), first[1].item<int64_t>()};
    std::vector<at::Tensor> expected_tokens, expected_sums;
    at::Tensor sum = best;
    for (int level = 0; level < 3; ++level) {
      std::vector<uint8_t> flat;
      for (const auto& row : masks[level]) flat.insert(flat.end(), row.begin(), row.end());
      const at::Tensor mask = at::tensor(flat, at::kByte).view({2, -1}).to(at::kBool).to(TestDevice());
      auto logits = reference->Forward(Longs(tokens), Longs({253 + level, 253 + level}), mask);
      ASSERT_TRUE(logits.ok()) << logits.status();
      const at::Tensor greedy = GreedyTokens(*logits).cpu();
      sum = sum + std::get<0>(logits->max(-1));
      expected_tokens.push_back(greedy);
      expected_sums.push_back(sum);
      sum = sum.flip(0);
      tokens = {greedy[1].item<int64_t>(), greedy[0].item<int64_t>()};
    }
    auto kept = subject->ForwardLevels(Longs({4, 5}), 251, 3, MirrorPick());
    ASSERT_TRUE(kept.ok()) << kept.status();
    ASSERT_EQ(kept->size(), 4u);
    EXPECT_TRUE(at::equal((*kept)[0][0].cpu(), first.cpu()));
    for (int level = 0; level < 3; ++level) {
      EXPECT_TRUE(at::equal((*kept)[level + 1][0].cpu(), expected_tokens[level])) << "level " << level + 1;
      EXPECT_LT(RelError((*kept)[level + 1][1], expected_sums[level]), kTol) << "level " << level + 1;
    }
    EXPECT_EQ(subject->tentative_length(), 9);
    EXPECT_EQ(subject->forward_counts(), (std::map<int64_t, int64_t>{{2, 4}}));
    // Keep the slot before, the prefix, and the path a0 b1 c0.
    for (LlamaModel* model : {reference, subject}) ASSERT_TRUE(model->Commit({0, 1, 2, 3, 6, 7}).ok());
    EXPECT_LT(RelError(FeedChain(*subject, {7, 8}), FeedChain(*reference, {7, 8})), kTol);
  });
}

// MirrorPick whose growth stops after level `last_fed` (Choice::go). Its
// draft is the last level's tokens that ran (MirrorPick's first kept).
LevelPick StoppingMirrorPick(int64_t last_fed) {
  return LevelPick::Of(
      2,
      [](const std::tuple<int64_t>& p, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) {
        const int64_t last_fed = std::get<0>(p);
        LevelPick::Choice choice =
            MirrorPick()(level, logits, level == 0 ? carry : std::vector<at::Tensor>{carry[0]});
        const at::Tensor draft = level <= last_fed ? choice.kept[0] : carry[1];  // past the stop it stays
        choice.kept = {draft};
        choice.carry.push_back(draft);
        choice.go = at::full({1}, level < last_fed, logits.options().dtype(at::kBool));
        return choice;
      },
      std::tuple<int64_t>{last_fed});
}

TEST(LlamaModelTest, StoppedLevelsSkipTheForwardsPastTheStop) {
  // A pick that stops growth after level 1: the draft of the levels up to
  // the stop, as without it, returned as every level's. A CUDA graph skips the levels
  // past the stop (conditional nodes: forwards and picks) and counts only the
  // forwards that ran; elsewhere every level runs and counts.
  ForEachPairAtBucketEdge([](const Variant& variant, bool static_shapes, LlamaModel* reference, LlamaModel* subject) {
    ASSERT_TRUE(reference->Commit({0}).ok());
    auto expected = reference->ForwardLevels(Longs({4, 5}), 251, 3, MirrorPick());
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (int run = 0; run < 2; ++run) {  // the second replays the graph
      subject->ResetForwardCounts();
      auto actual = subject->ForwardLevelsAt(Longs({4, 5}), {.start = Longs({251}), .max_start = 300, .min_start = 250},
                                             3, StoppingMirrorPick(1));
      ASSERT_TRUE(actual.ok()) << actual.status();
      ASSERT_EQ(actual->size(), 4u);
      for (size_t level = 0; level < 4; ++level)  // each level's: the draft when growth ended
        EXPECT_TRUE(at::equal((*actual)[level][0].cpu(), (*expected)[1][0].cpu())) << "level " << level;
      const bool skips = subject->device().is_cuda() && static_shapes && variant.config.sliding_window == 0;
      EXPECT_EQ(subject->forward_counts(), (std::map<int64_t, int64_t>{{2, skips ? 2 : 4}})) << "run " << run;
    }
  });
}

TEST(LlamaModelTest, DevicePositionedTreesEqualHostPositionedOnes) {
  // ForwardTreeAt (the start on the device, a larger host bound) against
  // Forward() with the tree's mask at the same place, after a tentative slot
  // every node must see; then CompactPathAt against Commit() of the accepted
  // path (nodes 2 and 4, whose entries move down; a walk's trailing zero
  // included), and the caches must agree for a forward on top. Static shapes
  // off: the defaults that read start back; on: slots, positions and the
  // mask's placement on the device.
  ForEachPairAtBucketEdge([](const Variant&, bool, LlamaModel* reference, LlamaModel* subject) {
    ASSERT_TRUE(reference->Commit({0}).ok());
    // Parents -1, 0, 0, 1, 2: node 3 under node 1, node 4 under node 2.
    const std::vector<uint8_t> rows = {1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0,
                                       1, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    const at::Tensor mask = at::tensor(rows, at::kByte).view({5, 5}).to(at::kBool).to(TestDevice());
    const at::Tensor tokens = Longs({4, 5, 6, 7, 8}), depths = Longs({0, 1, 1, 2, 2});
    auto expected = reference->Forward(tokens, depths + 251, mask);
    ASSERT_TRUE(expected.ok()) << expected.status();
    const DevicePosition at{.start = Longs({251}), .max_start = 260, .min_start = 251};
    auto actual = subject->ForwardTreeAt(tokens, depths, mask, at);
    ASSERT_TRUE(actual.ok()) << actual.status();
    EXPECT_LT(RelError(*actual, *expected), kTol);
    EXPECT_EQ(subject->forward_counts(), (std::map<int64_t, int64_t>{{5, 1}}));
    ASSERT_TRUE(reference->Commit({0, 2, 4}).ok());
    const absl::Status compacted = subject->CompactPathAt(Longs({2, 4, 0}), at);
    ASSERT_TRUE(compacted.ok()) << compacted;
    ASSERT_TRUE(subject->Truncate(254).ok());
    EXPECT_LT(RelError(FeedChain(*subject, {7, 8}), FeedChain(*reference, {7, 8})), kTol);
  });
}

TEST(LlamaModelTest, DevicePositionedLevelsEqualHostPositionedOnes) {
  // ForwardLevelsAt against ForwardLevels at the same place, after a
  // tentative slot the levels must see.
  ForEachPairAtBucketEdge([](const Variant&, bool, LlamaModel* reference, LlamaModel* subject) {
    ASSERT_TRUE(reference->Commit({0}).ok());
    auto expected = reference->ForwardLevels(Longs({4, 5}), 251, 3, MirrorPick());
    ASSERT_TRUE(expected.ok()) << expected.status();
    auto actual = subject->ForwardLevelsAt(Longs({4, 5}), {.start = Longs({251}), .max_start = 300, .min_start = 250},
                                           3, MirrorPick());
    ASSERT_TRUE(actual.ok()) << actual.status();
    ASSERT_EQ(actual->size(), expected->size());
    for (size_t level = 0; level < actual->size(); ++level) {
      ASSERT_EQ((*actual)[level].size(), (*expected)[level].size());
      EXPECT_TRUE(at::equal((*actual)[level][0].cpu(), (*expected)[level][0].cpu())) << "level " << level;
    }
    EXPECT_EQ(subject->forward_counts(), (std::map<int64_t, int64_t>{{2, 4}}));
  });
}

TEST(LlamaModelTest, DevicePositionedTreeErrors) {
  for (bool static_shapes : {false, true}) {
    SCOPED_TRACE(static_shapes ? "static" : "plain");
    auto model = MakeModel(SmallConfig(), 16);
    model->EnableCudaGraphs(static_shapes);
    FeedChain(*model, {1, 2, 3});
    const DevicePosition at{.start = Longs({3}), .max_start = 3, .min_start = 3};
    const at::Tensor mask = at::ones({2, 2}, at::kBool).tril().to(TestDevice());
    EXPECT_FALSE(model->ForwardTreeAt(Longs({1, 2}), Longs({0}), mask, at).ok());
    EXPECT_FALSE(model->ForwardTreeAt(Longs({1, 2}), Longs({0, 1}), mask.narrow(1, 0, 1), at).ok());
    EXPECT_FALSE(model->CompactPathAt(at::Tensor(), at).ok());
    if (static_shapes) {  // the host bound alone rules it out
      auto full = model->ForwardTreeAt(Longs({1, 2}), Longs({0, 1}), mask, {.start = Longs({3}), .max_start = 15});
      EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
    }
  }
  // The defaults read start back: below min_start is refused.
  auto model = MakeModel(SmallConfig(), 16);
  model->EnableCudaGraphs(false);
  FeedChain(*model, {1, 2, 3});
  auto early = model->ForwardTreeAt(Longs({1}), Longs({0}), at::ones({1, 1}, at::kBool).to(TestDevice()),
                                    {.start = Longs({1}), .max_start = 3, .min_start = 2});
  EXPECT_EQ(early.status().code(), absl::StatusCode::kInvalidArgument) << early.status();
}

TEST(LlamaModelTest, ForwardLevelsErrors) {
  for (bool static_shapes : {false, true}) {
    SCOPED_TRACE(static_shapes ? "static" : "plain");
    auto model = MakeModel(SmallConfig(), 16);
    model->EnableCudaGraphs(static_shapes);
    FeedChain(*model, {1, 2, 3});
    ASSERT_TRUE(model->Commit({0, 1, 2}).ok());
    EXPECT_FALSE(model->ForwardLevels(at::Tensor(), 3, 2, MirrorPick()).ok());
    EXPECT_FALSE(model->ForwardLevels(Longs({1, 2}), 3, 0, MirrorPick()).ok());
    EXPECT_FALSE(model->ForwardLevels(Longs({1, 2}), 3, 2, LevelPick{}).ok());  // no function
    EXPECT_FALSE(model->ForwardLevels(Longs({1, 2}), 3, 2, MirrorPick(/*width=*/3)).ok());  // it gives two nodes
    ASSERT_TRUE(model->Truncate(3).ok());
    auto full = model->ForwardLevels(Longs({1, 2}), 3, 6, MirrorPick());
    EXPECT_FALSE(full.ok());
    if (static_shapes) EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
    ASSERT_TRUE(model->Truncate(3).ok());
  }
}

TEST(LlamaModelTest, DevicePositionedForwardErrors) {
  for (bool static_shapes : {false, true}) {
    SCOPED_TRACE(static_shapes ? "static" : "plain");
    auto model = MakeModel(SmallConfig(), 16);
    model->EnableCudaGraphs(static_shapes);
    FeedChain(*model, {1, 2, 3});
    EXPECT_FALSE(model->ForwardAt(Longs({1}), {.start = Longs({1, 2}), .max_start = 2}).ok());
    EXPECT_FALSE(model->ForwardAt(at::Tensor(), {.start = Longs({1}), .max_start = 2}).ok());
    EXPECT_FALSE(model->ForwardChainAt(Longs({1, 2}), {.start = at::Tensor(), .max_start = 2}, 2,
                                       TestPick(true, nullptr)).ok());
    auto full = model->ForwardChainAt(Longs({1, 2}), {.start = Longs({2}), .max_start = 2}, 15, TestPick(true, nullptr));
    if (static_shapes) {  // the host bound alone rules it out
      EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
    } else {
      EXPECT_FALSE(full.ok());
    }
  }
  // The default reads start back and refuses slots never written.
  auto model = MakeModel(SmallConfig(), 16);
  model->EnableCudaGraphs(false);
  FeedChain(*model, {1, 2, 3});
  auto gap = model->ForwardAt(Longs({1}), {.start = Longs({5}), .max_start = 5});
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kInvalidArgument) << gap.status();
}

TEST(LlamaModelTest, UndefinedMaskIsACausalChain) {
  // Without a mask, new tokens form a chain over every tentative slot: the
  // same logits as the explicit chain mask, on the plain and padded forwards.
  for (bool padded : {false, true}) {
    auto explicit_mask = MakeModel(SmallConfig());
    auto no_mask = MakeModel(SmallConfig());
    explicit_mask->EnableCudaGraphs(padded);
    no_mask->EnableCudaGraphs(padded);
    FeedChain(*explicit_mask, {3, 4, 5});
    ASSERT_TRUE(no_mask->Forward(Longs({3, 4, 5}), Longs({0, 1, 2}), at::Tensor()).ok());
    ASSERT_TRUE(explicit_mask->Commit({0, 1}).ok());
    ASSERT_TRUE(no_mask->Commit({0, 1}).ok());
    FeedChain(*explicit_mask, {6});  // a tentative slot before the chain
    ASSERT_TRUE(no_mask->Forward(Longs({6}), Longs({2}), at::Tensor()).ok());
    const at::Tensor expected = FeedChain(*explicit_mask, {7, 8, 9});
    auto actual = no_mask->Forward(Longs({7, 8, 9}), Longs({3, 4, 5}), at::Tensor());
    ASSERT_TRUE(actual.ok()) << actual.status();
    EXPECT_LT(RelError(*actual, expected), kTol) << "padded " << padded;
  }
}

TEST(LlamaModelTest, InPlaceParameterUpdatesReachInference) {
  const ModelConfig config = SmallConfig("qwen2");
  auto model = MakeModel(config);
  const std::vector<int64_t> tokens = RandomTokens(5, config.vocab_size, 13);
  const at::Tensor before = FeedChain(*model, tokens);
  ASSERT_TRUE(model->Truncate(0).ok());
  {
    c10::NoGradGuard no_grad;
    for (auto& [name, param] : model->NamedParameters()) {
      if (name == "model.layers.0.self_attn.k_proj.weight") param.mul_(3.0);
      if (name == "model.layers.1.mlp.up_proj.weight") param.mul_(-1.0);
    }
  }
  const at::Tensor after = FeedChain(*model, tokens);
  ASSERT_TRUE(model->Truncate(0).ok());
  EXPECT_GT(RelError(after, before), kTol);  // moved beyond any rounding
  // A re-pointed parameter (set_data) must be honoured too.
  for (auto& [name, param] : model->NamedParameters()) {
    if (name == "model.layers.0.self_attn.v_proj.bias") param.set_data(param.detach().clone() + 1.0);
  }
  const at::Tensor repointed = FeedChain(*model, tokens);
  EXPECT_GT(RelError(repointed, after), kTol);
  // Save follows the parameters, so the reloaded model agrees.
  const std::string dir = TempDir("repointed");
  ASSERT_TRUE(model->Save(dir, at::kFloat).ok());
  auto loaded = LlamaModel::Load(dir, TestDevice(), at::kFloat, 16);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_LT(RelError(FeedChain(**loaded, tokens), repointed), kTol);
}

TEST(LlamaModelTest, LoadsShardedCheckpoint) {
  const ModelConfig config = SmallConfig();
  auto model = MakeModel(config);
  const std::string dir = TempDir("sharded");
  ASSERT_TRUE(model->Save(dir, at::kFloat).ok());
  auto tensors = ReadSafetensors(dir + "/model.safetensors");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  std::map<std::string, at::Tensor> shards[2];
  std::string weight_map;
  int i = 0;
  for (const auto& [name, tensor] : *tensors) {
    const int shard = i++ % 2;
    shards[shard].emplace(name, tensor);
    absl::StrAppend(&weight_map, weight_map.empty() ? "" : ",\n", "    \"", name, "\": \"model-0000", shard + 1,
                    "-of-00002.safetensors\"");
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model-00001-of-00002.safetensors", shards[0]).ok());
  ASSERT_TRUE(WriteSafetensors(dir + "/model-00002-of-00002.safetensors", shards[1]).ok());
  WriteFile(dir + "/model.safetensors.index.json",
            absl::StrCat("{\n  \"metadata\": {\"total_size\": 0},\n  \"weight_map\": {\n", weight_map, "\n  }\n}\n"));
  fs::remove(dir + "/model.safetensors");
  auto loaded = LlamaModel::Load(dir, TestDevice(), at::kFloat, 32);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<int64_t> tokens = RandomTokens(6, config.vocab_size, 14);
  EXPECT_TRUE(at::equal(FeedChain(**loaded, tokens), FeedChain(*model, tokens)));

  // A tensor the index promises but its shard lacks is named with the shard.
  shards[1].erase(shards[1].begin());
  const std::string dropped = std::next(tensors->begin())->first;
  ASSERT_TRUE(WriteSafetensors(dir + "/model-00002-of-00002.safetensors", shards[1]).ok());
  auto broken = LlamaModel::Load(dir, TestDevice(), at::kFloat, 32);
  ASSERT_FALSE(broken.ok());
  EXPECT_TRUE(Contains(broken.status(), dropped)) << broken.status();
  EXPECT_TRUE(Contains(broken.status(), "model-00002-of-00002.safetensors")) << broken.status();
}

TEST(LlamaModelTest, Bf16SaveAndLoad) {
  const ModelConfig config = SmallConfig();
  auto model = MakeModel(config);
  const std::string dir = TempDir("bf16");
  ASSERT_TRUE(model->Save(dir, at::kBFloat16).ok());
  auto tensors = ReadSafetensors(dir + "/model.safetensors");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_EQ(tensors->at("model.embed_tokens.weight").scalar_type(), at::kBFloat16);
  auto loaded = LlamaModel::Load(dir, TestDevice(), at::kBFloat16, 16);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (const auto& [name, param] : (*loaded)->NamedParameters()) {
    EXPECT_TRUE(at::equal(param.cpu(), tensors->at(name))) << name;
  }
  const std::vector<int64_t> tokens = RandomTokens(6, config.vocab_size, 15);
  const at::Tensor logits = FeedChain(**loaded, tokens);
  EXPECT_EQ(logits.scalar_type(), at::kFloat);
  // (How close bf16 arithmetic comes to float32 is ATen's matmul's business:
  // its accumulation type differs between processors.) What the file holds
  // is speclab's: the bf16 weights read as float32 give the float32 model's
  // logits within the weights' rounding, u_bf16 for each of the 21 weight
  // tensors on the way from token to logit (9 a layer: two norms, q, k, v, o,
  // gate, up, down; then the embedding, the final norm, the head), plus
  // float32's own arithmetic.
  auto widened = LlamaModel::Load(dir, TestDevice(), at::kFloat, 16);
  ASSERT_TRUE(widened.ok()) << widened.status();
  const double tolerance = 21 * testing::UnitRoundoff(at::kBFloat16) + kTol;
  EXPECT_LT(RelError(FeedChain(**widened, tokens), FeedChain(*model, tokens)), tolerance);
  EXPECT_TRUE(at::isfinite(logits).all().item<bool>());
}

TEST(LlamaModelTest, RandomModelsAreReproducible) {
  const ModelConfig config = SmallConfig();
  auto a = MakeModel(config, 16, 3);
  auto b = MakeModel(config, 16, 3);
  auto c = MakeModel(config, 16, 4);
  const std::vector<int64_t> tokens = {1, 2, 3};
  const at::Tensor la = FeedChain(*a, tokens);
  EXPECT_TRUE(at::equal(la, FeedChain(*b, tokens)));
  EXPECT_FALSE(at::equal(la, FeedChain(*c, tokens)));
  int64_t count = 0;
  for (const auto& [name, param] : a->NamedParameters()) count += param.numel();
  EXPECT_EQ(count, config.ParameterCount());
}

TEST(LlamaModelTest, ParameterCountMatchesNamedParameters) {
  for (const Variant& v : Variants()) {
    auto model = MakeModel(v.config, 4);
    int64_t count = 0;
    for (const auto& [name, param] : model->NamedParameters()) count += param.numel();
    EXPECT_EQ(count, v.config.ParameterCount()) << v.name;
  }
}

// --- Errors ---------------------------------------------------------------------

TEST(LlamaModelTest, CapacityExceededIsAnError) {
  auto model = MakeModel(SmallConfig(), /*capacity=*/8);
  auto too_many = model->Forward(Longs(Iota(9)), Longs(Iota(9)), ChainMask(9));
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(too_many.status(), "capacity")) << too_many.status();
  FeedChain(*model, Iota(6));
  auto more = model->Forward(Longs({1, 2, 3}), Longs({6, 7, 8}), ChainMask(3, 6));
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(model->tentative_length(), 6);  // unchanged by the failed call
  ASSERT_TRUE(model->Commit(Iota(6)).ok());
  EXPECT_TRUE(model->Forward(Longs({1, 2}), Longs({6, 7}), ChainMask(2)).ok());
  ASSERT_TRUE(model->ResetCache(32).ok());
  EXPECT_EQ(model->capacity(), 32);
  EXPECT_EQ(model->committed_length(), 0);
  EXPECT_TRUE(model->Forward(Longs(Iota(9)), Longs(Iota(9)), ChainMask(9)).ok());
}

TEST(LlamaModelTest, BadInputsAreErrors) {
  auto model = MakeModel(SmallConfig());
  struct Case {
    std::string what;
    at::Tensor tokens, positions, mask;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"mask shape", Longs({1, 2}), Longs({0, 1}), at::ones({2, 3}, at::kBool).to(TestDevice()), "mask has shape [2, 3]"},
      {"mask dtype", Longs({1, 2}), Longs({0, 1}), at::ones({2, 2}, at::kFloat).to(TestDevice()), "mask must be Bool"},
      {"mask dims", Longs({1, 2}), Longs({0, 1}), at::ones({2}, at::kBool).to(TestDevice()), "mask must have 2 dims"},
      {"token dtype", at::tensor({1, 2}, at::kInt).to(TestDevice()), Longs({0, 1}), ChainMask(2), "tokens must be Long"},
      {"positions size", Longs({1, 2}), Longs({0}), ChainMask(2), "positions has shape [1]"},
      {"undefined", at::Tensor(), Longs({0}), ChainMask(1), "tokens is undefined"},
      {"empty", Longs({}), Longs({}), at::ones({0, 0}, at::kBool).to(TestDevice()), "no tokens"},
      {"token range", Longs({1, 64}), Longs({0, 1}), ChainMask(2), "token ids"},
      {"negative position", Longs({1, 2}), Longs({-1, 0}), ChainMask(2), "positions"},
  };
  for (const Case& c : cases) {
    // Value checks (id range, negative positions) need a host sync, which
    // Forward makes only on the CPU (see LlamaModel::Impl::Forward).
    if (TestDevice().is_cuda() && (c.what == "token range" || c.what == "negative position")) continue;
    auto logits = model->Forward(c.tokens, c.positions, c.mask);
    ASSERT_FALSE(logits.ok()) << c.what;
    EXPECT_EQ(logits.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_TRUE(Contains(logits.status(), c.expect)) << c.what << ": " << logits.status();
    EXPECT_EQ(model->tentative_length(), 0) << c.what;
  }
  FeedChain(*model, {1, 2, 3});
  EXPECT_EQ(model->Commit({1, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Commit({2, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Commit({3}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(model->Commit({-1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(model->Commit({0, 2}).ok());
  EXPECT_EQ(model->committed_length(), 2);
  // Positions beyond the precomputed RoPE table still work.
  EXPECT_TRUE(model->Forward(Longs({1}), Longs({1000}), ChainMask(1)).ok());
  EXPECT_FALSE(LlamaModel::CreateRandom(SmallConfig(), TestDevice(), at::kFloat, 0, 1).ok());
  EXPECT_FALSE(LlamaModel::CreateRandom(SmallConfig(), TestDevice(), at::kLong, 8, 1).ok());
}

TEST(LlamaModelTest, LoadErrorsNameTheFileAndTensor) {
  const ModelConfig config = SmallConfig();
  auto model = MakeModel(config);
  const std::string missing = TempDir("missing") + "/nothing_here";
  auto no_dir = LlamaModel::Load(missing, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(no_dir.status(), missing)) << no_dir.status();

  const std::string no_config = TempDir("no_config");
  auto no_cfg = LlamaModel::Load(no_config, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(no_cfg.ok());
  EXPECT_TRUE(Contains(no_cfg.status(), "config.json")) << no_cfg.status();

  const std::string no_weights = TempDir("no_weights");
  ASSERT_TRUE(config.WriteJsonFile(no_weights + "/config.json").ok());
  auto no_w = LlamaModel::Load(no_weights, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(no_w.ok());
  EXPECT_TRUE(Contains(no_w.status(), "model.safetensors")) << no_w.status();

  const std::string truncated = TempDir("truncated");
  ASSERT_TRUE(model->Save(truncated, at::kFloat).ok());
  const std::string weights = truncated + "/model.safetensors";
  fs::resize_file(weights, fs::file_size(weights) - 100);
  auto trunc = LlamaModel::Load(truncated, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(trunc.ok());
  EXPECT_TRUE(Contains(trunc.status(), weights)) << trunc.status();

  const std::string wrong_shape = TempDir("wrong_shape");
  ASSERT_TRUE(model->Save(wrong_shape, at::kFloat).ok());
  ModelConfig bigger = config;
  bigger.intermediate_size = 56;
  ASSERT_TRUE(bigger.WriteJsonFile(wrong_shape + "/config.json").ok());
  auto shape = LlamaModel::Load(wrong_shape, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(shape.ok());
  EXPECT_TRUE(Contains(shape.status(), "model.safetensors")) << shape.status();
  EXPECT_TRUE(Contains(shape.status(), "'model.layers.0.mlp.down_proj.weight' has shape [32, 48], expected [32, 56]"))
      << shape.status();

  const std::string missing_tensor = TempDir("missing_tensor");
  ASSERT_TRUE(model->Save(missing_tensor, at::kFloat).ok());
  auto tensors = ReadSafetensors(missing_tensor + "/model.safetensors");
  ASSERT_TRUE(tensors.ok());
  tensors->erase("model.layers.1.self_attn.o_proj.weight");
  ASSERT_TRUE(WriteSafetensors(missing_tensor + "/model.safetensors", *tensors).ok());
  auto absent = LlamaModel::Load(missing_tensor, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(absent.ok());
  EXPECT_TRUE(Contains(absent.status(), "model.layers.1.self_attn.o_proj.weight")) << absent.status();
  EXPECT_TRUE(Contains(absent.status(), "model.safetensors")) << absent.status();

  const std::string extra_tensor = TempDir("extra_tensor");
  ASSERT_TRUE(model->Save(extra_tensor, at::kFloat).ok());
  tensors = ReadSafetensors(extra_tensor + "/model.safetensors");
  ASSERT_TRUE(tensors.ok());
  tensors->emplace("model.layers.0.self_attn.o_proj.bias", at::zeros({32}));
  ASSERT_TRUE(WriteSafetensors(extra_tensor + "/model.safetensors", *tensors).ok());
  auto extra = LlamaModel::Load(extra_tensor, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(extra.ok());
  EXPECT_TRUE(Contains(extra.status(), "unexpected tensor 'model.layers.0.self_attn.o_proj.bias'")) << extra.status();

  // A header that relabels one tensor's bytes as another dtype (same bytes).
  const std::string relabelled = TempDir("relabelled");
  ASSERT_TRUE(model->Save(relabelled, at::kFloat).ok());
  tensors = ReadSafetensors(relabelled + "/model.safetensors");
  ASSERT_TRUE(tensors.ok());
  at::Tensor& o_proj = tensors->at("model.layers.1.self_attn.o_proj.weight");
  o_proj = o_proj.contiguous().view(at::kBFloat16).clone();
  ASSERT_TRUE(WriteSafetensors(relabelled + "/model.safetensors", *tensors).ok());
  auto garbage = LlamaModel::Load(relabelled, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(garbage.ok());
  EXPECT_TRUE(Contains(garbage.status(), "'model.layers.1.self_attn.o_proj.weight' is BFloat16")) << garbage.status();
  EXPECT_TRUE(Contains(garbage.status(), "share one dtype")) << garbage.status();

  // Every tensor relabelled alike (bf16 bytes called f16): config.json tells.
  const std::string all_relabelled = TempDir("all_relabelled");
  ASSERT_TRUE(model->Save(all_relabelled, at::kBFloat16).ok());
  tensors = ReadSafetensors(all_relabelled + "/model.safetensors");
  ASSERT_TRUE(tensors.ok());
  for (auto& [name, tensor] : *tensors) tensor = tensor.view(at::kHalf).clone();
  ASSERT_TRUE(WriteSafetensors(all_relabelled + "/model.safetensors", *tensors).ok());
  auto relabelled_all = LlamaModel::Load(all_relabelled, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(relabelled_all.ok());
  EXPECT_TRUE(Contains(relabelled_all.status(), "(Half) but config.json's torch_dtype is bfloat16"))
      << relabelled_all.status();

  const std::string nan_weight = TempDir("nan_weight");
  ASSERT_TRUE(model->Save(nan_weight, at::kFloat).ok());
  tensors = ReadSafetensors(nan_weight + "/model.safetensors");
  ASSERT_TRUE(tensors.ok());
  tensors->at("model.norm.weight") = tensors->at("model.norm.weight").clone().index_fill_(0, at::zeros({1}, at::kLong),
                                                                                     std::nan(""));
  ASSERT_TRUE(WriteSafetensors(nan_weight + "/model.safetensors", *tensors).ok());
  auto nan_model = LlamaModel::Load(nan_weight, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(nan_model.ok());
  EXPECT_TRUE(Contains(nan_model.status(), "'model.norm.weight' holds NaN")) << nan_model.status();

  const std::string gpt2 = TempDir("gpt2");
  WriteFile(gpt2 + "/config.json", R"({"model_type": "gpt2", "vocab_size": 10})");
  auto unsupported = LlamaModel::Load(gpt2, TestDevice(), at::kFloat, 8);
  ASSERT_FALSE(unsupported.ok());
  EXPECT_TRUE(Contains(unsupported.status(), "gpt2")) << unsupported.status();
  EXPECT_TRUE(Contains(unsupported.status(), "llama, qwen2, mistral")) << unsupported.status();
  EXPECT_TRUE(Contains(unsupported.status(), "config.json")) << unsupported.status();
}

// --- ModelConfig ------------------------------------------------------------------

TEST(ModelConfigTest, ParsesTransformers4Llama3Config) {
  const std::string path = TempDir("cfg4") + "/config.json";
  WriteFile(path, R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "max_position_embeddings": 131072,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 128256
})");
  auto config = ModelConfig::FromJsonFile(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->head_dim, 128);
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->eos_token_id, 128001);
  EXPECT_EQ(config->bos_token_id, 128000);
  EXPECT_EQ(config->rope_scaling.type, "llama3");
  EXPECT_EQ(config->rope_scaling.factor, 8.0);
  EXPECT_EQ(config->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(config->rope_theta, 500000.0);
  EXPECT_EQ(config->rms_norm_eps, 1e-5);
  EXPECT_EQ(config->torch_dtype, "bfloat16");
  EXPECT_EQ(config->ParameterCount(), 8030261248);  // Llama-3.1-8B
}

TEST(ModelConfigTest, ParsesTransformers5Qwen2Config) {
  const std::string path = TempDir("cfg5") + "/config.json";
  WriteFile(path, R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "dtype": "float32",
  "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
  "vocab_size": 256, "head_dim": null, "sliding_window": null, "use_sliding_window": false,
  "layer_types": ["full_attention", "full_attention"],
  "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
  "tie_word_embeddings": true, "eos_token_id": 3
})");
  auto config = ModelConfig::FromJsonFile(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->attention_bias);
  EXPECT_EQ(config->num_key_value_heads, 4);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->rope_theta, 1000000.0);
  EXPECT_EQ(config->rope_scaling.type, "");
  EXPECT_EQ(config->sliding_window, 0);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_EQ(config->torch_dtype, "float32");
  EXPECT_EQ(config->eos_token_id, 3);
}

TEST(ModelConfigTest, WriteThenReadRoundTrips) {
  for (const Variant& v : Variants()) {
    ModelConfig config = v.config;
    config.eos_token_id = 2;
    config.rms_norm_eps = 1e-6;
    const std::string path = TempDir("cfg_rt") + "/config.json";
    ASSERT_TRUE(config.WriteJsonFile(path).ok()) << v.name;
    auto read = ModelConfig::FromJsonFile(path);
    ASSERT_TRUE(read.ok()) << v.name << ": " << read.status();
    EXPECT_EQ(read->model_type, config.model_type);
    EXPECT_EQ(read->num_key_value_heads, config.num_key_value_heads);
    EXPECT_EQ(read->head_dim, config.head_dim);
    EXPECT_EQ(read->rms_norm_eps, config.rms_norm_eps);
    EXPECT_EQ(read->rope_theta, config.rope_theta);
    EXPECT_EQ(read->rope_scaling.type, config.rope_scaling.type);
    EXPECT_EQ(read->rope_scaling.factor, config.rope_scaling.factor);
    EXPECT_EQ(read->rope_scaling.original_max_position_embeddings,
              config.rope_scaling.original_max_position_embeddings);
    EXPECT_EQ(read->sliding_window, config.sliding_window);
    EXPECT_EQ(read->attention_bias, config.attention_bias);
    EXPECT_EQ(read->tie_word_embeddings, config.tie_word_embeddings);
    EXPECT_EQ(read->eos_token_id, 2);
    const std::string text = ReadFile(path);
    EXPECT_NE(text.find("\"architectures\""), std::string::npos);
    EXPECT_NE(text.find("\"torch_dtype\": \"float32\""), std::string::npos);
  }
}

TEST(ModelConfigTest, ErrorsNameFileAndKey) {
  const std::string dir = TempDir("cfg_err");
  struct Case {
    std::string json;
    std::string expect;
  };
  const Case cases[] = {
      {R"({"model_type": "gpt2"})", "supported: llama, qwen2, mistral"},
      {R"({"vocab_size": 3})", "'model_type'"},
      {R"({"model_type": "llama", "vocab_size": "many"})", "'vocab_size'"},
      {R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
           "num_hidden_layers": 1, "num_attention_heads": 2, "rope_scaling": {"rope_type": "yarn", "factor": 2}})",
       "yarn"},
      {R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
           "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2})",
       "num_key_value_heads"},
      {R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
           "num_hidden_layers": 1, "num_attention_heads": 2, "rope_scaling": {"rope_type": "llama3", "factor": 8}})",
       "'rope_scaling.low_freq_factor'"},
      {"{\"model_type\": [", "invalid JSON"},
      // Found by tests/fuzz/fuzz_config_json.cc: a float past int64's range
      // was cast (undefined behaviour) instead of refused.
      {R"({"model_type": "llama", "vocab_size": 1e79})", "'vocab_size': expected an integer"},
      {R"({"model_type": "llama", "vocab_size": -9.3e18})", "'vocab_size': expected an integer"},
  };
  for (const Case& c : cases) {
    const std::string path = dir + "/config.json";
    WriteFile(path, c.json);
    auto config = ModelConfig::FromJsonFile(path);
    ASSERT_FALSE(config.ok()) << c.json;
    EXPECT_TRUE(Contains(config.status(), path)) << config.status();
    EXPECT_TRUE(Contains(config.status(), c.expect)) << config.status();
  }
  auto missing = ModelConfig::FromJsonFile(dir + "/absent.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace speclab
