// EAGLE's head: its incremental tree drafting equals the head's causal
// forward over the same inputs, checkpoints round-trip with errors that name
// the file and the tensor, and the engine keeps greedy output at T = 0 and
// the target's law at T = 1 on chains and trees.
#include "drafters/eagle/eagle_drafter.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/file_util.h"
#include "framework/core/float_bounds.h"
#include "framework/model/safetensors.h"
#include "framework/speculative_decoder.h"
#include "tests/support/float_tolerance.h"
#include "tests/support/prompt_features.h"
#include "tests/support/host_only_drafter.h"
#include "tests/support/pipelined_agreement.h"
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
  return ::testing::TempDir() + "/eagle_" + std::to_string(::getpid()) + "_" + name;
}

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

// The head's causal forward (no cache) over inputs fc([embed(x_p), f_{p-1}])
// at positions 1.. : its prediction f^ at the last position.
at::Tensor CausalPrediction(EagleHead& head, const std::vector<int64_t>& tokens, const at::Tensor& features) {
  c10::NoGradGuard no_grad;
  const at::Tensor inputs = head.Fuse(at::tensor(tokens, at::kLong), features).unsqueeze(0);
  const at::Tensor hidden = head.body->ForwardTrainingEmbedded(inputs, 1);
  return hidden[0].narrow(0, hidden.size(1) - 1, 1);
}

// A node's readout is the head's causal forward over the committed tokens
// (with the target's features) followed by the node's path (with the head's
// own predictions): the tree's attention sees exactly the node's ancestors.
TEST(EagleDrafterTest, TreeNodesEqualTheHeadsCausalForwardAlongTheirPath) {
  auto target = TinyModel(1);
  auto head = NewEagleHead(*target, 1, 64, 9);
  ASSERT_TRUE(head.ok()) << head.status();
  auto reference = NewEagleHead(*target, 1, 64, 9);
  EagleDrafter drafter(*target, *std::move(head));
  EXPECT_EQ(drafter.target_features().hidden_layers, std::vector<int>{-1});
  const TargetFeatures features = PromptFeatures(*target, kPrompt);
  ASSERT_TRUE(drafter.Reset(kPrompt, features).ok());
  ASSERT_TRUE(drafter.BeginStep(kPrompt).ok());
  // A node whose parent was never listed is refused.
  TokenTree orphan(kPrompt.back());
  const int grandchild = orphan.AddNode(orphan.AddNode(0, 3), 3);
  auto refused = drafter.NextTokenLogits(orphan, {grandchild}, at::Tensor());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("was never listed"));

  TokenTree tree(kPrompt.back());
  const int a = tree.AddNode(0, 4), b = tree.AddNode(0, 2);
  const int a1 = tree.AddNode(a, 9), a2 = tree.AddNode(a, 11), a11 = tree.AddNode(a1, 6);
  auto first = drafter.NextTokenLogits(tree, {0, a, b}, at::Tensor());
  ASSERT_TRUE(first.ok()) << first.status();
  // Node tokens on the device in place of the tree's own (placeholders here).
  TokenTree placeholders = tree;
  for (int node : {a1, a2, a11}) placeholders.set_token(node, 0);
  auto second = drafter.NextTokenLogits(placeholders, {a2, a11, a1}, at::tensor({11, 6, 9}, at::kLong));
  ASSERT_TRUE(second.ok()) << second.status();

  // Reference: each path fed through the causal forward, one position at a time.
  const std::vector<int64_t> prompt_tail(kPrompt.begin() + 1, kPrompt.end());
  std::map<int, at::Tensor> predicted;
  predicted[0] = CausalPrediction(*reference, prompt_tail, features.hidden[0]);
  for (int node : {a, b, a1, a2, a11}) {
    std::vector<int64_t> tokens = prompt_tail;
    at::Tensor inputs = features.hidden[0];
    for (int on_path : tree.PathTo(node)) {
      if (on_path == 0) continue;
      tokens.push_back(tree.token(on_path));
      inputs = at::cat({inputs, predicted.at(tree.parent(on_path))});
    }
    predicted[node] = CausalPrediction(*reference, tokens, inputs);
  }
  // Each node's prediction chains one head forward per depth (the root's
  // included) through the fc's product-sums, each within the forward's
  // first-order bound, carried through the final norm at most unchanged.
  const double u = testing::UnitRoundoff(at::kFloat);
  const int64_t hidden = target->config().hidden_size;
  const double per_forward = testing::ForwardTolerance(target->config(), 16, u) + float_bounds::Gamma(2 * hidden, u);
  const std::map<int, at::Tensor> got = {{0, (*first)[0]}, {a, (*first)[1]},  {b, (*first)[2]},
                                         {a2, (*second)[0]}, {a11, (*second)[1]}, {a1, (*second)[2]}};
  for (const auto& [node, logits] : got) {
    const at::Tensor want = target->LmHead(predicted.at(node))[0];
    EXPECT_LT(RelativeError(logits, want), (tree.depth(node) + 1) * per_forward) << "node " << node;
  }

  // A context that does not continue the fed one is refused.
  EXPECT_EQ(drafter.BeginStep({1, 5, 3}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(EagleDrafterTest, CheckpointsRoundTripAndErrorsNameTheFileAndTensor) {
  auto target = TinyModel(1);
  auto head = NewEagleHead(*target, 2, 32, 4);
  ASSERT_TRUE(head.ok()) << head.status();
  const std::string path = TempPath("head.safetensors");
  ASSERT_TRUE(SaveEagleHead(path, *head, at::kFloat).ok());
  auto loaded = LoadEagleHead(path, *target, 32);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::map<std::string, at::Tensor> want = head->Tensors(), got = loaded->Tensors();
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got.count("layers.1.mlp.down_proj.weight"), 1u);
  for (const auto& [name, tensor] : want) EXPECT_TRUE(at::equal(got.at(name), tensor)) << name;

  std::map<std::string, at::Tensor> tensors = want;
  tensors.erase("layers.0.self_attn.o_proj.weight");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto missing = LoadEagleHead(path, *target, 32);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no tensor 'layers.0.self_attn.o_proj.weight'"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path));
  tensors = want;
  tensors["fc.bias"] = at::zeros({3});
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  EXPECT_THAT(std::string(LoadEagleHead(path, *target, 32).status().message()),
              HasSubstr("'fc.bias' has shape [3]"));
  tensors = want;
  tensors["layers.0.self_attn.q_proj.bias"] = at::zeros({target->config().hidden_size});
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  EXPECT_THAT(std::string(LoadEagleHead(path, *target, 32).status().message()),
              HasSubstr("'layers.0.self_attn.q_proj.bias' is not part of an EAGLE head of 2 layers"));
  auto config = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle, path: ", path,
                                            "}, verifier: {type: greedy}}"),
                               target.get());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("drafter.path"));
  auto both = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle, layers: 1, path: ", path,
                                          "}, verifier: {type: greedy}}"),
                             target.get());
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("drafter.layers"));
  RemoveTree(path);
}

// At T = 0, EAGLE's chains and trees with greedy verification are greedy decoding.
TEST(EagleDrafterTest, ChainsAndTreesEqualGreedyAtTemperatureZero) {
  auto target = TinyModel(1);
  const DecodeOptions greedy_options{.sampling = {.temperature = 0}, .max_new_tokens = 24, .time_phases = false};
  auto greedy = GenerateAutoregressive(*target, kPrompt, greedy_options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  for (const char* builder : {"{type: chain}, length_policy: {type: fixed, gamma: 3}",
                              "{type: static, choices: [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}",
                              "{type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 8}"}) {
    for (const char* verifier : {"greedy", "point_mass"}) {
      auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle}, verifier: {type: ", verifier,
                                                "}, tree_builder: ", builder, "}"),
                                   target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      auto out = GenerateSpeculative(*target, *method, kPrompt, greedy_options);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->tokens, greedy->tokens) << builder << " + " << verifier;
    }
  }
}

// The device form (DraftChain, DraftLevels) drafts what token-by-token and
// level-by-level drafting through NextTokenLogits does, in its eager form
// and in its static-shape form (the body of its CUDA graph, run eagerly on
// the CPU): at T = 0 all accept the same drafts at every step.
TEST(EagleDrafterTest, TheDeviceFormDraftsWhatTheHostFormDoes) {
  // Eight tokens, so that an untrained head's drafts are accepted at times.
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 40, .time_phases = false};
  enum class Form { kHost, kDeviceEager, kDeviceStatic };
  for (const char* parts : {"verifier: {type: rejection}, length_policy: {type: fixed, gamma: 4}",
                            "tree_builder: {type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 8}, verifier: "
                            "{type: point_mass}",
                            "tree_builder: {type: best_first, budget: 8, max_beam_len: 4}, verifier: "
                            "{type: point_mass}"}) {
    SCOPED_TRACE(parts);
    std::vector<Generation> runs;
    for (Form form : {Form::kHost, Form::kDeviceEager, Form::kDeviceStatic}) {
      auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle}, ", parts, "}"), target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      auto* body = dynamic_cast<LlamaModel*>(method->drafter->models().at(0));
      ASSERT_NE(body, nullptr);
      body->EnableCudaGraphs(form == Form::kDeviceStatic);
      if (form == Form::kHost) method->drafter = std::make_unique<testing::HostOnlyDrafter>(std::move(method->drafter));
      auto out = GenerateSpeculative(*target, *method, kPrompt, options);
      ASSERT_TRUE(out.ok()) << out.status();
      runs.push_back(*std::move(out));
    }
    int accepted = 0;
    for (size_t form = 1; form < runs.size(); ++form) {
      SCOPED_TRACE(form == 1 ? "eager device form" : "static device form");
      EXPECT_EQ(runs[form].tokens, runs[0].tokens);
      ASSERT_EQ(runs[form].steps.size(), runs[0].steps.size());
      for (size_t i = 0; i < runs[0].steps.size(); ++i) {
        EXPECT_EQ(runs[form].steps[i].accepted, runs[0].steps[i].accepted) << "step " << i;
        accepted += runs[form].steps[i].accepted;
      }
    }
    EXPECT_GT(accepted, 0) << "no draft accepted: the comparison would not see the drafts";
  }
}

// A pipelined step feeds the head the path the last step accepted with the
// target features kept on the device, in the eager form and in the static
// one: at T = 0 it drafts, accepts and emits what the step-by-step loop
// does, step for step, for chains and for trees.
TEST(EagleDrafterTest, PipelinedStepsDraftFromTheSameFeatures) {
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  for (const char* parts : {"verifier: {type: greedy}, length_policy: {type: fixed, gamma: 3}",
                            "tree_builder: {type: dynamic_topk, top_k: 2, depth: 3, total_tokens: 6}, verifier: "
                            "{type: point_mass}",
                            "tree_builder: {type: best_first, budget: 6, max_beam_len: 3}, verifier: "
                            "{type: point_mass}",
                            // Pipelined, its levels stop on the device (LevelPick::Choice::go); step
                            // by step on the CPU, the host loop stops.
                            "tree_builder: {type: opt_tree, nodes: 3, threshold: 0.05, max_depth: 4}, verifier: "
                            "{type: point_mass}"}) {
    for (bool static_shapes : {false, true}) {
      SCOPED_TRACE(absl::StrCat(parts, static_shapes ? ", static shapes" : ", eager"));
      auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle}, ", parts, "}"), target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      dynamic_cast<LlamaModel&>(*method->drafter->models().at(0)).EnableCudaGraphs(static_shapes);
      const testing::StepAgreement seen = testing::ExpectPipelinedAsStepByStep(*target, *method, kPrompt, 40, "pipelined");
      EXPECT_GT(seen.accepted, 0) << "no draft accepted: the comparison would not see the drafts";
    }
  }
}

// A step grown by the device form cannot be extended through the host form,
// whose node state it never filled: NextTokenLogits says so.
TEST(EagleDrafterTest, AStepDraftedOnTheDeviceRefusesHostExtension) {
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  auto method = MethodFromYaml("{name: m, drafter: {type: eagle}, verifier: {type: rejection}}", target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  auto* drafter = dynamic_cast<EagleDrafter*>(method->drafter.get());
  ASSERT_NE(drafter, nullptr);
  ASSERT_TRUE(drafter->Reset(kPrompt, PromptFeatures(*target, kPrompt)).ok());
  ASSERT_TRUE(drafter->BeginStep(kPrompt).ok());
  const ChainPick greedy = ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
    return std::make_pair(logits.argmax(-1), at::Tensor());
  });
  auto chain = drafter->DraftChain(3, greedy);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->tokens.size(0), 4);
  TokenTree tree(kPrompt.back());
  tree.AddNode(0, static_cast<int32_t>(chain->tokens[1].item<int64_t>()));
  auto logits = drafter->NextTokenLogits(tree, {1}, at::Tensor());
  EXPECT_EQ(logits.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(logits.status().message()), HasSubstr("drafted on the device"));
}

// At T = 1 the head's q is a draft law like any other: a chain with
// rejection sampling and a sampled tree with traversal verification keep the
// target's law of the first two tokens, pipelined and step by step.
TEST(EagleDrafterTest, ChainsAndSampledTreesKeepTheTargetsLaw) {
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const testing::TwoTokenLaw law = testing::ExactTwoTokenLaw(*target, kPrompt, 1.0);
  for (const char* parts : {"verifier: {type: rejection}, length_policy: {type: fixed, gamma: 2}",
                            "tree_builder: {type: static, sampling: true, choices: [[0], [1], [0, 0]]}, verifier: "
                            "{type: traversal}"}) {
    auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle, layers: 1}, ", parts, "}"),
                                 target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, kPrompt, law, kRuns, parts);
  }
}

}  // namespace
}  // namespace speclab
