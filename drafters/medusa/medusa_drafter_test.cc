// Medusa heads: the formula, Medusa's initialisation (the target's LM head,
// read in place), checkpoint errors, and the engine: greedy equality at T = 0
// and the exact output law at T = 1 with a q-based verifier.
#include "drafters/medusa/medusa_drafter.h"

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
  return ::testing::TempDir() + "/medusa_" + std::to_string(::getpid()) + "_" + name;
}

TEST(MedusaDrafterTest, WithoutACheckpointEveryHeadIsTheTargetsLmHead) {
  auto target = TinyModel(1);
  auto method = MethodFromYaml("{name: m, drafter: {type: medusa, heads: 3}, verifier: {type: greedy}}", target.get());
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
  for (int row = 0; row < 3; ++row) EXPECT_TRUE(at::equal((*logits)[row], head[0])) << "row " << row;

  // Head d serves depth d only: a fourth level has no head.
  const int deeper = tree.AddNode(tree.AddNode(grandchild, 2), 3);
  auto refused = drafter.NextTokenLogits(tree, {deeper}, at::Tensor());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("there are 3"));
}

TEST(MedusaDrafterTest, CheckpointHeadsFollowTheirFormula) {
  auto target = TinyModel(1);
  const int64_t hidden = target->config().hidden_size, vocab = target->config().vocab_size;
  constexpr int kHeads = 2, kLayers = 2;
  std::map<std::string, at::Tensor> tensors;
  at::manual_seed(5);
  for (int k = 0; k < kHeads; ++k) {
    for (int l = 0; l < kLayers; ++l) {
      tensors[absl::StrCat(k, ".", l, ".linear.weight")] = at::randn({hidden, hidden}) * 0.2;
      tensors[absl::StrCat(k, ".", l, ".linear.bias")] = at::randn({hidden}) * 0.2;
    }
    tensors[absl::StrCat(k, ".", kLayers, ".weight")] = at::randn({vocab, hidden});
  }
  const std::string path = TempPath("heads.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto heads = LoadMedusaHeads(path, kHeads, kLayers, *target);
  ASSERT_TRUE(heads.ok()) << heads.status();
  MedusaDrafter drafter(*target, *std::move(heads));
  const at::Tensor h = at::randn({1, hidden});
  const at::Tensor got = drafter.HeadLogits(h);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{kHeads, vocab}));
  // The formula in float64; float32's error is bounded by gamma(hidden + 1)
  // of every product-sum (each ResBlock's and the head's) over the absolute
  // values, the ResBlocks' errors carried through the head (SiLU' < 1.1).
  const double u = testing::UnitRoundoff(at::kFloat), g = float_bounds::Gamma(hidden + 1, u);
  for (int k = 0; k < kHeads; ++k) {
    at::Tensor x = h.to(at::kDouble), carried = at::zeros_like(x);
    for (int l = 0; l < kLayers; ++l) {
      const at::Tensor a = tensors[absl::StrCat(k, ".", l, ".linear.weight")].to(at::kDouble);
      const at::Tensor b = tensors[absl::StrCat(k, ".", l, ".linear.bias")].to(at::kDouble);
      const at::Tensor magnitude = at::linear(x.abs(), a.abs(), b.abs());
      carried = carried + 1.1 * (at::linear(carried, a.abs()) + g * magnitude) + u * (x.abs() + magnitude);
      x = x + at::silu(at::linear(x, a, b));
    }
    const at::Tensor w = tensors[absl::StrCat(k, ".", kLayers, ".weight")].to(at::kDouble);
    const at::Tensor want = at::linear(x, w);
    const at::Tensor bound = at::linear(carried, w.abs()) + g * at::linear(x.abs(), w.abs());
    EXPECT_LE(testing::BoundRatio(got[k].unsqueeze(0).to(at::kDouble), want, bound), 1.0) << "head " << k;
  }

  // Errors name the file and the tensor.
  auto missing = LoadMedusaHeads(path, 3, kLayers, *target);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no tensor '2.0.linear.weight'"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path));
  auto extra = LoadMedusaHeads(path, 1, kLayers, *target);
  EXPECT_THAT(std::string(extra.status().message()), HasSubstr("is not part of 1 heads"));
  tensors["0.0.linear.bias"] = at::zeros({hidden + 1});
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto shape = LoadMedusaHeads(path, kHeads, kLayers, *target);
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr("'0.0.linear.bias' has shape"));
  auto config = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: medusa, heads: 2, layers: 2, path: ", path,
                                            "}, verifier: {type: greedy}}"),
                               target.get());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("drafter.path"));
  RemoveTree(path);
}

// Heads saved without LM heads (speclab's trained ones) read out through the
// target's: loading gives the same heads, and their logits are the target's
// LM head on the ResBlocks' output.
TEST(MedusaDrafterTest, HeadsWithoutLmHeadsReadOutThroughTheTargets) {
  auto target = TinyModel(1);
  const int64_t hidden = target->config().hidden_size;
  at::manual_seed(3);
  std::vector<MedusaHead> heads(2);
  for (MedusaHead& head : heads) {
    head.weights.push_back(at::randn({hidden, hidden}) * 0.2);
    head.biases.push_back(at::randn({hidden}) * 0.2);
  }
  const std::string path = TempPath("shared.safetensors");
  ASSERT_TRUE(SaveMedusaHeads(path, heads, at::kFloat).ok());
  auto loaded = LoadMedusaHeads(path, 2, 1, *target);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const at::Tensor h = at::randn({1, hidden});
  for (int k = 0; k < 2; ++k) {
    EXPECT_FALSE((*loaded)[k].lm_head.defined());
    EXPECT_TRUE(at::equal((*loaded)[k].weights[0], heads[k].weights[0]));
    const at::Tensor x = h + at::silu(at::linear(h, heads[k].weights[0], heads[k].biases[0]));
    EXPECT_TRUE(at::equal(MedusaHeadLogits((*loaded)[k], *target, h), target->LmHead(x))) << "head " << k;
  }
  RemoveTree(path);
}

// At T = 0, Medusa's trees with greedy verification are greedy decoding.
TEST(MedusaDrafterTest, StaticTreesEqualGreedyAtTemperatureZero) {
  auto target = TinyModel(1);
  const DecodeOptions greedy_options{.sampling = {.temperature = 0}, .max_new_tokens = 24, .time_phases = false};
  auto greedy = GenerateAutoregressive(*target, kPrompt, greedy_options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  for (const char* verifier : {"greedy", "point_mass"}) {
    auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: medusa, heads: 2}, tree_builder: {type: "
                                              "static, choices: [[0], [1], [0, 0], [0, 1], [1, 0]]}, verifier: {type: ",
                                              verifier, "}}"),
                                 target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, kPrompt, greedy_options);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << verifier;
  }
}

// At T = 1 the heads' q is a draft law like any other: rejection sampling on
// a chain and traversal verification of a sampled tree keep the target's law
// of the first two tokens, pipelined (the heads' device form, fed the path's
// rows on the device) and step by step.
TEST(MedusaDrafterTest, ChainsAndSampledTreesKeepTheTargetsLaw) {
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const testing::TwoTokenLaw law = testing::ExactTwoTokenLaw(*target, kPrompt, 1.0);
  for (const char* parts : {"verifier: {type: rejection}, length_policy: {type: fixed, gamma: 2}",
                            "tree_builder: {type: static, sampling: true, choices: [[0], [1], [0, 0]]}, verifier: "
                            "{type: traversal}"}) {
    auto method =
        MethodFromYaml(absl::StrCat("{name: m, drafter: {type: medusa, heads: 2}, ", parts, "}"), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    // Medusa's initial heads propose the root's law one place too late, so
    // drafts are accepted rarely (about one run in twenty here): enough to
    // exercise both branches of the rule, which is what the law test needs.
    testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, kPrompt, law, kRuns, parts);
  }
}

// A pipelined chain or tree hands the heads the same state the step-by-step
// loop does: at T = 0 both draft, accept and emit the same tokens, step for
// step. Medusa's initial heads propose the root again, so they are accepted
// where greedy decoding repeats a token; these targets do so at some steps
// and not at others, so that a state one row off would change what is
// accepted.
TEST(MedusaDrafterTest, PipelinedStepsDraftFromTheSameStates) {
  for (const auto& [parts, form] :
       {std::make_pair("verifier: {type: greedy}, length_policy: {type: fixed, gamma: 3}", "pipelined chain"),
        std::make_pair("tree_builder: {type: static, choices: [[0], [1], [0, 0], [1, 0], [0, 0, 0]]}, verifier: "
                       "{type: point_mass}",
                       "pipelined tree")}) {
    for (uint64_t seed : {3, 7}) {
      SCOPED_TRACE(parts);
      auto target = TinyModel(seed, /*vocab=*/8);
      auto method =
          MethodFromYaml(absl::StrCat("{name: m, drafter: {type: medusa, heads: 3}, ", parts, "}"), target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      const testing::StepAgreement seen = testing::ExpectPipelinedAsStepByStep(*target, *method, kPrompt, 40, form);
      EXPECT_GT(seen.accepted, 0) << "seed " << seed;
      EXPECT_GT(seen.rejected, 0) << "seed " << seed;
    }
  }
}

// The heads' device work is counted per generation, one run a drafted chain
// (pipelined, the one step queued past the end too), so that experiments
// price it beside the forwards (Generation::draft_graph_runs).
TEST(MedusaDrafterTest, AGenerationCountsItsHeadsRuns) {
  auto target = TinyModel(3, /*vocab=*/8);
  auto method = MethodFromYaml(
      "{name: m, drafter: {type: medusa, heads: 3}, verifier: {type: greedy}, length_policy: {type: fixed, gamma: 3}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  for (bool pipeline : {false, true}) {
    DecodeOptions options{.max_new_tokens = 12};
    options.pipeline = pipeline;
    for (int generation = 0; generation < 2; ++generation) {
      absl::StatusOr<Generation> out = GenerateSpeculative(*target, *method, kPrompt, options);
      ASSERT_TRUE(out.ok()) << out.status();
      int64_t runs = 0;
      for (const auto& [work, count] : out->draft_graph_runs) runs += count;
      const auto steps = static_cast<int64_t>(out->steps.size());
      EXPECT_GE(runs, steps) << "pipeline " << pipeline;
      EXPECT_LE(runs, steps + (pipeline ? 1 : 0)) << "pipeline " << pipeline;
    }
  }
}

}  // namespace
}  // namespace speclab
