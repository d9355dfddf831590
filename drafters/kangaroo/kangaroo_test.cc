// Kangaroo's drafting model is the target's shallow layers and an attention
// block on top; its adapter round-trips through checkpoints with errors that
// name the file and the tensor; and the engine keeps greedy output at T = 0
// (pipelined and step by step) and the target's law at T = 1 under the
// double early exit (the confidence policy).
#include "drafters/kangaroo/kangaroo_adapter.h"

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
#include "framework/model/safetensors.h"
#include "framework/speculative_decoder.h"
#include "tests/support/float_tolerance.h"
#include "tests/support/pipelined_agreement.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::speclab::testing::MethodFromYaml;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3};

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/kangaroo_" + std::to_string(::getpid()) + "_" + name;
}

at::Tensor Positions(int64_t n) { return at::arange(n, at::kLong); }

// Logits of the drafting model = an attention block (the adapter, its MLP
// zero) fed the target's hidden state after the exit layer, read out by the
// target's final norm and LM head.
TEST(KangarooTest, TheDraftingModelIsAnAttentionBlockOnTheShallowLayers) {
  auto target = TinyModel(3, /*vocab=*/16, /*layers=*/3);
  auto model = NewKangarooModel(*target, 2, 32, 11);
  ASSERT_TRUE(model.ok()) << model.status();
  const at::Tensor tokens = at::tensor(std::vector<int64_t>{1, 5, 3, 7, 2}, at::kLong);
  auto logits = (*model)->Forward(tokens, Positions(5), at::Tensor());
  ASSERT_TRUE(logits.ok()) << logits.status();

  ASSERT_TRUE(target->Truncate(0).ok());
  ASSERT_TRUE(target->KeepHiddenStates({2}).ok());
  ASSERT_TRUE(target->Forward(tokens, Positions(5), at::Tensor()).ok());
  const at::Tensor shallow = target->HiddenStates(2)->clone();
  auto adapter = LlamaModel::WithNewLayers(*target, 1, 32, 11);
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  ZeroAdapterMlp(**adapter, 0);
  auto want = (*adapter)->ForwardEmbedded(shallow, Positions(5), at::Tensor());
  ASSERT_TRUE(want.ok()) << want.status();
  const double tolerance = testing::ForwardTolerance(target->config(), 5, testing::UnitRoundoff(at::kFloat));
  EXPECT_LE((*logits - *want).abs().max().item<double>(), tolerance * want->abs().max().item<double>());
  // The MLP is out of the picture: its other weights change nothing.
  for (auto& [name, tensor] : (*adapter)->NamedParameters()) {
    c10::NoGradGuard no_grad;
    if (name == "model.layers.0.mlp.gate_proj.weight") tensor.fill_(3.0);
  }
  ASSERT_TRUE((*adapter)->Truncate(0).ok());
  auto again = (*adapter)->ForwardEmbedded(shallow, Positions(5), at::Tensor());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(at::equal(*again, *want));
  EXPECT_EQ(NewKangarooModel(*target, 3, 32, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NewKangarooModel(*target, 0, 32, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KangarooTest, AdaptersRoundTripAndErrorsNameTheFileAndTensor) {
  auto target = TinyModel(1, /*vocab=*/16, /*layers=*/3);
  auto model = NewKangarooModel(*target, 1, 32, 4);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string path = TempPath("adapter.safetensors");
  ASSERT_TRUE(SaveKangarooAdapter(path, **model, 1, 1, at::kFloat).ok());
  auto loaded = LoadKangarooModel(path, *target, 32);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::map<std::string, at::Tensor> want = AdapterTensors(**model, 1), got = AdapterTensors(**loaded, 1);
  ASSERT_EQ(want.size(), 5u);
  for (const auto& [name, tensor] : want) EXPECT_TRUE(at::equal(got.at(name), tensor)) << name;
  auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: kangaroo, path: ", path,
                                            "}, verifier: {type: greedy}}"),
                               target.get());
  EXPECT_TRUE(method.ok()) << method.status();

  std::map<std::string, at::Tensor> tensors = want;
  tensors["exit_layer"] = at::tensor(std::vector<int64_t>{1}, at::kLong);
  tensors["adapter.mlp.down_proj.weight"] = at::zeros({4, 4});
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  EXPECT_THAT(std::string(LoadKangarooModel(path, *target, 32).status().message()),
              HasSubstr("'adapter.mlp.down_proj.weight' is not part of a Kangaroo adapter"));
  tensors.erase("adapter.mlp.down_proj.weight");
  tensors.erase("adapter.self_attn.o_proj.weight");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto missing = LoadKangarooModel(path, *target, 32);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no tensor 'adapter.self_attn.o_proj.weight'"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path));
  tensors = want;
  tensors["exit_layer"] = at::tensor(std::vector<int64_t>{3}, at::kLong);
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  EXPECT_THAT(std::string(LoadKangarooModel(path, *target, 32).status().message()),
              HasSubstr("exit layer 3 is outside [1, 2]"));
  auto both = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: kangaroo, exit_layer: 1, path: ", path,
                                          "}, verifier: {type: greedy}}"),
                             target.get());
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("drafter.exit_layer"));
  auto none = MethodFromYaml("{name: m, drafter: {type: kangaroo}, verifier: {type: greedy}}", target.get());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("exit_layer"));
  RemoveTree(path);
}

// At T = 0 Kangaroo's chains and trees are greedy decoding, pipelined as step
// by step; at T = 1 its chain under the confidence stop keeps the target's law.
TEST(KangarooTest, ChainsAndTreesAreExact) {
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/3, /*logit_scale=*/40);
  for (const char* parts : {"verifier: {type: greedy}, length_policy: {type: fixed, gamma: 3}",
                            "tree_builder: {type: dynamic_topk, top_k: 2, depth: 3, total_tokens: 6}, verifier: "
                            "{type: point_mass}"}) {
    SCOPED_TRACE(parts);
    auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: kangaroo, exit_layer: 2}, ", parts, "}"),
                                 target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    testing::ExpectGreedyPipelinedAndStepByStep(*target, *method, kPrompt);
  }
  constexpr int kRuns = 2000;
  const testing::TwoTokenLaw law = testing::ExactTwoTokenLaw(*target, kPrompt, 1.0);
  auto method = MethodFromYaml("{name: m, drafter: {type: kangaroo, exit_layer: 2}, verifier: {type: rejection}, "
                               "length_policy: {type: confidence, threshold: 0.3, max: 3}}",
                               target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const testing::TwoTokenSample sample = testing::SampleTwoTokens(*target, *method, kPrompt, kRuns, 700);
  const auto [statistic, dof, critical] = testing::ChiSquareTest(sample.counts, law, kRuns);
  EXPECT_LT(statistic, critical);
  EXPECT_GT(sample.accepted, kRuns / 10) << "drafts were rarely accepted; the test would not exercise acceptance";
}

}  // namespace
}  // namespace speclab
