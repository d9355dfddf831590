// Hydra heads: the formula along each node's path, the initial heads (the
// target's LM head on h), checkpoint errors, the device form against the
// host form, and the engine: greedy equality at T = 0, the same steps
// pipelined, and the exact output law at T = 1 with q-based verifiers.
#include "drafters/hydra/hydra_drafter.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/file_util.h"
#include "framework/core/float_bounds.h"
#include "framework/model/safetensors.h"
#include "framework/speculative_decoder.h"
#include "tests/support/float_tolerance.h"
#include "tests/support/host_only_drafter.h"
#include "tests/support/pipelined_agreement.h"
#include "tests/support/prompt_features.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::speclab::testing::MethodFromYaml;
using ::speclab::testing::PromptFeatures;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3};

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/hydra_" + std::to_string(::getpid()) + "_" + name;
}

// The initial heads with every weight moved by `scale` times a normal draw
// (own LM heads with biases where asked), so that each head reads the
// path's tokens; written to a checkpoint. The weights on the embeddings are
// divided by the embeddings' spread (a tiny model's are small beside its
// states), so that the path moves the logits as much as the state does.
std::string PerturbedHeads(const LlamaModel& target, int heads, int layers, double scale, bool own_lm_heads,
                           const std::string& name, uint64_t seed = 5) {
  at::manual_seed(seed);
  std::vector<HydraHead> out;
  const int64_t hidden = target.config().hidden_size, vocab = target.config().vocab_size;
  const double spread = target.Embed(at::arange(vocab, at::kLong)).std().item<double>();
  for (int k = 0; k < heads; ++k) {
    HydraHead head = InitialHydraHead(target, k, layers);
    for (at::Tensor* t : {&head.in_weight, &head.in_bias, &head.res_weight, &head.res_bias})
      *t = *t + at::randn_like(*t) * scale;
    for (at::Tensor* t : {&head.in_weight, &head.res_weight})
      t->narrow(1, hidden, t->size(1) - hidden).div_(spread);
    for (at::Tensor& t : head.weights) t = t + at::randn_like(t) * scale;
    for (at::Tensor& t : head.biases) t = t + at::randn_like(t) * scale;
    if (own_lm_heads) {
      head.lm_head = at::randn({vocab, hidden});
      head.lm_bias = at::randn({vocab});
    }
    out.push_back(std::move(head));
  }
  const std::string path = TempPath(name);
  EXPECT_TRUE(SaveHydraHeads(path, out, at::kFloat).ok());
  return path;
}

TEST(HydraDrafterTest, WithoutACheckpointEveryHeadIsTheTargetsLmHead) {
  auto target = TinyModel(1);
  auto method = MethodFromYaml("{name: m, drafter: {type: hydra, heads: 3}, verifier: {type: greedy}}", target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  Drafter& drafter = *method->drafter;
  EXPECT_EQ(drafter.target_features().hidden_layers, std::vector<int>{-1});
  const TargetFeatures features = PromptFeatures(*target, kPrompt);
  ASSERT_TRUE(drafter.Reset(kPrompt, features).ok());
  ASSERT_TRUE(drafter.BeginStep(kPrompt).ok());
  TokenTree tree(kPrompt.back());
  const int child = tree.AddNode(0, 4);
  const int grandchild = tree.AddNode(child, 9);
  auto logits = drafter.NextTokenLogits(tree, {0, child, grandchild}, at::Tensor());
  ASSERT_TRUE(logits.ok()) << logits.status();
  const at::Tensor h = features.hidden[0].narrow(0, features.hidden[0].size(0) - 1, 1);
  const at::Tensor head = target->LmHead(h);
  for (int row = 0; row < 3; ++row) EXPECT_TRUE(at::allclose((*logits)[row], head[0])) << "row " << row;

  const int deeper = tree.AddNode(tree.AddNode(grandchild, 2), 3);
  auto refused = drafter.NextTokenLogits(tree, {deeper}, at::Tensor());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("there are 3"));
}

// Each node's row is its head's formula on [h, the path's embeddings], in
// float64 within a bound derived from float32's product-sums: gamma(n + 1)
// over the absolute values of every product-sum, errors carried through the
// later blocks and the LM head (SiLU' < 1.1).
TEST(HydraDrafterTest, EachNodeIsItsHeadOnItsPath) {
  auto target = TinyModel(1);
  const int64_t hidden = target->config().hidden_size;
  constexpr int kHeads = 3, kLayers = 2;
  const std::string path = PerturbedHeads(*target, kHeads, kLayers, 0.2, /*own_lm_heads=*/true, "formula");
  auto heads = LoadHydraHeads(path, kHeads, kLayers, *target);
  ASSERT_TRUE(heads.ok()) << heads.status();
  const std::vector<HydraHead> want_heads = *heads;
  HydraDrafter drafter(*target, *std::move(heads));
  const TargetFeatures features = PromptFeatures(*target, kPrompt);
  ASSERT_TRUE(drafter.Reset(kPrompt, features).ok());
  ASSERT_TRUE(drafter.BeginStep(kPrompt).ok());
  TokenTree tree(kPrompt.back());
  const int a = tree.AddNode(0, 4), b = tree.AddNode(0, 6);
  const int aa = tree.AddNode(a, 9), ba = tree.AddNode(b, 1);
  const std::vector<int> nodes = {ba, 0, aa, a, b};
  auto got = drafter.NextTokenLogits(tree, nodes, at::Tensor());
  ASSERT_TRUE(got.ok()) << got.status();

  const at::Tensor h = features.hidden[0].narrow(0, features.hidden[0].size(0) - 1, 1).to(at::kDouble);
  const double u = testing::UnitRoundoff(at::kFloat), gh = float_bounds::Gamma(hidden + 2, u);
  for (size_t row = 0; row < nodes.size(); ++row) {
    const int node = nodes[row], k = tree.depth(node);
    std::vector<int64_t> tokens(k + 1);
    for (int at = node, i = k; at >= 0; at = tree.parent(at), --i) tokens[i] = tree.token(at);
    const at::Tensor embedded = target->Embed(at::tensor(tokens, at::kLong)).to(at::kDouble).reshape({1, -1});
    const at::Tensor x = at::cat({h, embedded}, 1);
    const HydraHead& head = want_heads[k];
    auto d = [](const at::Tensor& t) { return t.to(at::kDouble); };
    const double gi = float_bounds::Gamma(x.size(1) + 2, u);
    const at::Tensor inner = at::linear(x, d(head.in_weight), d(head.in_bias));
    const at::Tensor projected = at::linear(x, d(head.res_weight), d(head.res_bias));
    at::Tensor y = projected + at::silu(inner);
    const at::Tensor inner_mag = at::linear(x.abs(), d(head.in_weight).abs(), d(head.in_bias).abs());
    const at::Tensor projected_mag = at::linear(x.abs(), d(head.res_weight).abs(), d(head.res_bias).abs());
    at::Tensor carried = gi * projected_mag + 1.1 * gi * inner_mag + u * (projected_mag + 1.1 * inner_mag);
    for (size_t l = 0; l < head.weights.size(); ++l) {
      const at::Tensor w = d(head.weights[l]), bias = d(head.biases[l]);
      const at::Tensor magnitude = at::linear(y.abs(), w.abs(), bias.abs());
      carried = carried + 1.1 * (at::linear(carried, w.abs()) + gh * magnitude) + u * (y.abs() + magnitude);
      y = y + at::silu(at::linear(y, w, bias));
    }
    const at::Tensor w = d(head.lm_head), bias = d(head.lm_bias);
    const at::Tensor want = at::linear(y, w, bias);
    const at::Tensor bound = at::linear(carried, w.abs()) + gh * at::linear(y.abs(), w.abs(), bias.abs());
    EXPECT_LE(testing::BoundRatio((*got)[row].unsqueeze(0).to(at::kDouble), want, bound), 1.0) << "node " << node;
  }
  RemoveTree(path);
}

TEST(HydraDrafterTest, CheckpointsRoundTripAndErrorsNameTheFileAndTensor) {
  auto target = TinyModel(1);
  const int64_t hidden = target->config().hidden_size;
  const std::string path = PerturbedHeads(*target, 2, 1, 0.2, /*own_lm_heads=*/false, "shared");
  auto loaded = LoadHydraHeads(path, 2, 1, *target);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (const HydraHead& head : *loaded) EXPECT_FALSE(head.lm_head.defined());
  auto tensors = ReadSafetensors(path);
  ASSERT_TRUE(tensors.ok());
  EXPECT_TRUE(at::equal((*loaded)[1].res_weight, tensors->at("hydra_mlp.1.0.res_connection.weight")));
  const at::Tensor x = at::randn({1, 3 * hidden});
  const HydraHead& head = (*loaded)[1];
  const at::Tensor y =
      at::linear(x, head.res_weight, head.res_bias) + at::silu(at::linear(x, head.in_weight, head.in_bias));
  EXPECT_TRUE(at::equal(HydraHeadLogits(head, *target, x), target->LmHead(y)));

  auto missing = LoadHydraHeads(path, 3, 1, *target);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no tensor 'hydra_mlp.2.0.linear.weight'"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path));
  auto extra = LoadHydraHeads(path, 1, 1, *target);
  EXPECT_THAT(std::string(extra.status().message()), HasSubstr("is not part of 1 heads"));
  auto layers = LoadHydraHeads(path, 2, 2, *target);
  EXPECT_THAT(std::string(layers.status().message()), HasSubstr("no tensor 'hydra_mlp.0.1.linear.weight'"));
  (*tensors)["hydra_mlp.1.0.linear.weight"] = at::zeros({hidden, 2 * hidden});
  ASSERT_TRUE(WriteSafetensors(path, *tensors).ok());
  auto shape = LoadHydraHeads(path, 2, 1, *target);
  const std::string wrong_shape = absl::StrCat("'hydra_mlp.1.0.linear.weight' has shape [", hidden, ", ", 2 * hidden, "]");
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr(wrong_shape));
  auto config = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: hydra, heads: 2, path: ", path,
                                            "}, verifier: {type: greedy}}"),
                               target.get());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("drafter.path"));
  RemoveTree(path);
}

// At T = 0, Hydra's chains and trees with greedy verification are greedy decoding.
TEST(HydraDrafterTest, ChainsAndTreesEqualGreedyAtTemperatureZero) {
  auto target = TinyModel(1);
  const std::string path = PerturbedHeads(*target, 3, 1, 0.05, false, "greedy");
  const DecodeOptions greedy_options{.sampling = {.temperature = 0}, .max_new_tokens = 24, .time_phases = false};
  auto greedy = GenerateAutoregressive(*target, kPrompt, greedy_options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  for (const char* parts : {"verifier: {type: greedy}, length_policy: {type: fixed, gamma: 3}",
                            "tree_builder: {type: static, choices: [[0], [1], [0, 0], [0, 1], [1, 0]]}, verifier: "
                            "{type: point_mass}"}) {
    auto method = MethodFromYaml(
        absl::StrCat("{name: m, drafter: {type: hydra, heads: 3, path: ", path, "}, ", parts, "}"), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, kPrompt, greedy_options);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << parts;
  }
  RemoveTree(path);
}

// The device form (DraftChain, DraftLevels: every node's path kept as
// embeddings on the device), pipelined, drafts what node-by-node drafting
// through NextTokenLogits does step by step: at T = 0 both accept the same
// drafts at every step, for chains, fixed-depth levels and best_first's
// levels of mixed depths.
TEST(HydraDrafterTest, TheDeviceFormDraftsWhatTheHostFormDoes) {
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const std::string path = PerturbedHeads(*target, 4, 1, 0.05, false, "device");
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 40, .time_phases = false};
  for (const char* parts : {"verifier: {type: rejection}, length_policy: {type: fixed, gamma: 4}",
                            "tree_builder: {type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 8}, verifier: "
                            "{type: point_mass}",
                            "tree_builder: {type: best_first, budget: 8, max_beam_len: 3}, verifier: "
                            "{type: point_mass}"}) {
    SCOPED_TRACE(parts);
    std::vector<Generation> runs;
    for (bool host : {true, false}) {
      auto method = MethodFromYaml(
          absl::StrCat("{name: m, drafter: {type: hydra, heads: 4, path: ", path, "}, ", parts, "}"), target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      if (host) method->drafter = std::make_unique<testing::HostOnlyDrafter>(std::move(method->drafter));
      auto out = GenerateSpeculative(*target, *method, kPrompt, options);
      ASSERT_TRUE(out.ok()) << out.status();
      runs.push_back(*std::move(out));
    }
    EXPECT_THAT(runs[0].engine_form, HasSubstr("step by step"));
    EXPECT_THAT(runs[1].engine_form, HasSubstr("pipelined"));
    EXPECT_EQ(runs[1].tokens, runs[0].tokens);
    ASSERT_EQ(runs[1].steps.size(), runs[0].steps.size());
    int accepted = 0;
    for (size_t i = 0; i < runs[0].steps.size(); ++i) {
      EXPECT_EQ(runs[1].steps[i].accepted, runs[0].steps[i].accepted) << "step " << i;
      accepted += runs[1].steps[i].accepted;
    }
    EXPECT_GT(accepted, 0) << "no draft accepted: the comparison would not see the drafts";
  }
  RemoveTree(path);
}

// Level 0: the root's two best tokens; each later level: every node's best
// child. The tokens are kept.
LevelPick::Choice TwoThenBest(const std::tuple<>&, int64_t level, const at::Tensor& logits,
                              const std::vector<at::Tensor>&) {
  LevelPick::Choice choice;
  const auto longs = logits.options().dtype(at::kLong);
  choice.tokens = level == 0 ? std::get<1>(logits[0].topk(2)) : logits.argmax(-1);
  choice.parents = level == 0 ? at::zeros({2}, longs) : at::arange(2, longs);
  choice.kept = {choice.tokens};
  return choice;
}

// DraftLevels grows each node with the head of its depth on its own path, and
// DraftChain each token with the head of its place, as NextTokenLogits does
// node by node: the same tokens, for heads strongly moved by the path.
TEST(HydraDrafterTest, TheDeviceFormContinuesEachNodeOnItsPath) {
  auto target = TinyModel(3, /*vocab=*/16);
  const std::string path = PerturbedHeads(*target, 3, 1, 1.0, false, "levels");
  auto heads = LoadHydraHeads(path, 3, 1, *target);
  ASSERT_TRUE(heads.ok()) << heads.status();
  HydraDrafter drafter(*target, *std::move(heads));
  ASSERT_TRUE(drafter.Reset(kPrompt, PromptFeatures(*target, kPrompt)).ok());
  ASSERT_TRUE(drafter.BeginStep(kPrompt).ok());
  auto levels = drafter.DraftLevels(2, LevelPick::Of(2, TwoThenBest));
  ASSERT_TRUE(levels.ok()) << levels.status();
  ASSERT_EQ(levels->size(), 3u);

  TokenTree tree(kPrompt.back());
  ASSERT_TRUE(drafter.BeginStep(kPrompt).ok());
  auto root = drafter.NextTokenLogits(tree, {0}, at::Tensor());
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<int> nodes;
  const at::Tensor top = std::get<1>((*root)[0].topk(2));
  for (int i = 0; i < 2; ++i) nodes.push_back(tree.AddNode(0, static_cast<int32_t>(top[i].item<int64_t>())));
  EXPECT_TRUE(at::equal((*levels)[0][0], at::tensor({tree.token(nodes[0]), tree.token(nodes[1])}, at::kLong)));
  for (size_t level = 1; level < levels->size(); ++level) {
    auto logits = drafter.NextTokenLogits(tree, nodes, at::Tensor());
    ASSERT_TRUE(logits.ok()) << logits.status();
    const at::Tensor best = logits->argmax(-1);
    EXPECT_TRUE(at::equal((*levels)[level][0], best)) << "level " << level;
    for (int& node : nodes) node = tree.AddNode(node, static_cast<int32_t>(best[&node - nodes.data()].item<int64_t>()));
  }

  // A chain: head i on the chain's tokens 0..i.
  ASSERT_TRUE(drafter.BeginStep(kPrompt).ok());
  const ChainPick best = ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
    return ChainPick::Result{logits.argmax(-1), at::Tensor()};
  });
  auto chain = drafter.DraftChain(3, best);
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_TRUE(drafter.BeginStep(kPrompt).ok());
  TokenTree line(kPrompt.back());
  std::vector<int64_t> want{kPrompt.back()};
  for (int node = 0; node < 3;) {
    auto logits = drafter.NextTokenLogits(line, {node}, at::Tensor());
    ASSERT_TRUE(logits.ok()) << logits.status();
    want.push_back(logits->argmax(-1).item<int64_t>());
    node = line.AddNode(node, static_cast<int32_t>(want.back()));
  }
  EXPECT_TRUE(at::equal(chain->tokens.view({-1}), at::tensor(want, at::kLong)))
      << chain->tokens << " drafted, " << at::tensor(want, at::kLong) << " node by node";
  RemoveTree(path);
}

// A pipelined chain or tree hands the heads the state the step-by-step loop
// does: at T = 0 both draft, accept and emit the same tokens, step for step.
TEST(HydraDrafterTest, PipelinedStepsDraftFromTheSameStates) {
  for (const auto& [parts, form] :
       {std::make_pair("verifier: {type: greedy}, length_policy: {type: fixed, gamma: 3}", "pipelined chain"),
        std::make_pair("tree_builder: {type: static, choices: [[0], [1], [0, 0], [1, 0], [0, 0, 0]]}, verifier: "
                       "{type: point_mass}",
                       "pipelined tree")}) {
    for (uint64_t seed : {3, 7}) {
      SCOPED_TRACE(parts);
      auto target = TinyModel(seed, /*vocab=*/8);
      const std::string path = PerturbedHeads(*target, 3, 1, 0.05, false, "pipelined");
      auto method = MethodFromYaml(
          absl::StrCat("{name: m, drafter: {type: hydra, heads: 3, path: ", path, "}, ", parts, "}"), target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      const testing::StepAgreement seen = testing::ExpectPipelinedAsStepByStep(*target, *method, kPrompt, 40, form);
      EXPECT_GT(seen.accepted, 0) << "seed " << seed;
      EXPECT_GT(seen.rejected, 0) << "seed " << seed;
      RemoveTree(path);
    }
  }
}

// At T = 1 the heads' q is a draft law like any other: rejection sampling on
// a chain and traversal verification of a sampled tree keep the target's law
// of the first two tokens, pipelined and step by step.
TEST(HydraDrafterTest, ChainsAndSampledTreesKeepTheTargetsLaw) {
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const std::string path = PerturbedHeads(*target, 2, 1, 0.05, false, "law");
  const testing::TwoTokenLaw law = testing::ExactTwoTokenLaw(*target, kPrompt, 1.0);
  for (const char* parts : {"verifier: {type: rejection}, length_policy: {type: fixed, gamma: 2}",
                            "tree_builder: {type: static, sampling: true, choices: [[0], [1], [0, 0]]}, verifier: "
                            "{type: traversal}"}) {
    auto method = MethodFromYaml(
        absl::StrCat("{name: m, drafter: {type: hydra, heads: 2, path: ", path, "}, ", parts, "}"), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, kPrompt, law, kRuns, parts);
  }
  RemoveTree(path);
}

}  // namespace
}  // namespace speclab
