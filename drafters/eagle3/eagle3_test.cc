// EAGLE-3's head: drafting from a root is the training-time test's unrolled
// head at that root (what is trained is what drafts), checkpoints carry the
// fused layers and are told apart from EAGLE-1's, bad options are named, and
// the engine keeps greedy output at T = 0 and the target's law at T = 1,
// pipelined and step by step.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/eagle/eagle_drafter.h"
#include "drafters/eagle/eagle_head.h"
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
// A 2-layer target's low, middle and high hidden states: the embeddings,
// the first layer's output and the final norm's.
constexpr char kDrafter[] = "{type: eagle3, feature_layers: [0, 1, 2]}";

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/eagle3_" + std::to_string(::getpid()) + "_" + name;
}

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

// The drafter's readouts along a chain drafted from the root x_r of a window
// are the unrolled head's at origin r - 1: step j's prediction there reads
// out q after the root's j - 1 drafts.
TEST(Eagle3Test, DraftingFromARootIsTheUnrolledHeadAtThatRoot) {
  auto target = TinyModel(3, /*vocab=*/16, /*layers=*/3);
  const std::vector<int> layers = {1, 2, 3};
  auto head = NewEagleHead(*target, 1, 64, 5, layers);
  auto reference = NewEagleHead(*target, 1, 64, 5, layers);
  ASSERT_TRUE(head.ok() && reference.ok()) << head.status();
  EXPECT_TRUE(head->fuses());
  const std::vector<int64_t> window = {1, 5, 3, 7, 2, 5, 3, 9, 4, 11, 6};
  const int64_t t = static_cast<int64_t>(window.size()), steps = 3;
  std::vector<at::Tensor> predicted;
  {
    c10::NoGradGuard no_grad;
    const at::Tensor tokens = at::tensor(window, at::kLong).unsqueeze(0);
    auto hidden = target->ForwardTrainingLayers(target->Embed(tokens), at::arange(t, at::kLong),
                                                at::ones({t, t}, at::kBool).tril(), layers);
    ASSERT_TRUE(hidden.ok()) << hidden.status();
    auto unrolled = UnrollHead(*reference, tokens, *hidden, steps);
    ASSERT_TRUE(unrolled.ok()) << unrolled.status();
    predicted = *std::move(unrolled);
  }
  ASSERT_EQ(predicted.size(), 3u);
  for (int64_t j = 1; j <= steps; ++j) EXPECT_EQ(predicted[j - 1].size(1), t - j);

  EagleDrafter drafter(*target, *std::move(head));
  EXPECT_EQ(drafter.target_features().hidden_layers, layers);
  const double u = testing::UnitRoundoff(at::kFloat);
  const int64_t hidden = target->config().hidden_size;
  const double features = testing::ForwardTolerance(target->config(), t, u) + float_bounds::Gamma(3 * hidden, u);
  const double per_forward = testing::ForwardTolerance(target->config(), 16, u) + float_bounds::Gamma(2 * hidden, u);
  for (int64_t root : {1, 4, 7}) {
    SCOPED_TRACE(absl::StrCat("root at ", root));
    const std::vector<int32_t> prompt(window.begin(), window.begin() + root + 1);
    ASSERT_TRUE(drafter.Reset(prompt, PromptFeatures(*target, prompt, layers)).ok());
    ASSERT_TRUE(drafter.BeginStep(prompt).ok());
    TokenTree chain(prompt.back());
    std::vector<int> nodes = {0};
    for (int64_t d = 1; d < steps; ++d)
      nodes.push_back(chain.AddNode(nodes.back(), static_cast<int32_t>(window[root + d])));
    auto logits = drafter.NextTokenLogits(chain, nodes, at::Tensor());
    ASSERT_TRUE(logits.ok()) << logits.status();
    for (int64_t j = 1; j <= steps; ++j) {
      const at::Tensor want = target->LmHead(predicted[j - 1][0][root - 1]);
      EXPECT_LT(RelativeError((*logits)[j - 1], want), features + (j + 1) * per_forward) << "step " << j;
    }
  }
}

TEST(Eagle3Test, CheckpointsCarryTheFusedLayersAndAreToldApartFromEagleOnes) {
  auto target = TinyModel(1);
  auto head = NewEagleHead(*target, 1, 32, 4, {0, 1, 2});
  ASSERT_TRUE(head.ok()) << head.status();
  const std::string path = TempPath("head.safetensors");
  ASSERT_TRUE(SaveEagleHead(path, *head, at::kBFloat16).ok());
  auto loaded = LoadEagleHead(path, *target, 32);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->feature_layers, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(at::equal(loaded->fuse_weight, head->fuse_weight.to(at::kBFloat16).to(at::kFloat)));
  auto as_eagle = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle, path: ", path, "}, verifier: {type: greedy}}"),
                                 target.get());
  EXPECT_THAT(std::string(as_eagle.status().message()), HasSubstr("type eagle3"));
  auto as_eagle3 = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle3, path: ", path, "}, verifier: {type: greedy}}"),
                                  target.get());
  EXPECT_TRUE(as_eagle3.ok()) << as_eagle3.status();
  auto shaped = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle3, feature_layers: [0, 1], path: ", path,
                                            "}, verifier: {type: greedy}}"),
                               target.get());
  EXPECT_THAT(std::string(shaped.status().message()), HasSubstr("drafter.feature_layers"));

  const std::map<std::string, at::Tensor> want = head->Tensors();
  std::map<std::string, at::Tensor> tensors = want;
  tensors["fuse.layers"] = at::tensor({0, 1, 1}, at::kLong);
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto twice = LoadEagleHead(path, *target, 32);
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr("'fuse.layers': feature layer 1 is listed twice"));
  EXPECT_THAT(std::string(twice.status().message()), HasSubstr(path));
  tensors["fuse.layers"] = at::tensor({0, 1, 9}, at::kLong);
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  EXPECT_THAT(std::string(LoadEagleHead(path, *target, 32).status().message()), HasSubstr("'fuse.layers'"));
  tensors = want;
  tensors["fuse.weight"] = at::zeros({3, 3});
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  EXPECT_THAT(std::string(LoadEagleHead(path, *target, 32).status().message()),
              HasSubstr("'fuse.weight' has shape [3, 3]"));
  tensors = want;
  tensors.erase("fuse.layers");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  EXPECT_THAT(std::string(LoadEagleHead(path, *target, 32).status().message()), HasSubstr("no tensor 'fuse.layers'"));

  // An EAGLE-1 head is not an EAGLE-3 one.
  auto one = NewEagleHead(*target, 1, 32, 4);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(SaveEagleHead(path, *one, at::kFloat).ok());
  auto refused = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: eagle3, path: ", path, "}, verifier: {type: greedy}}"),
                                target.get());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("type eagle"));
  RemoveTree(path);
}

TEST(Eagle3Test, OptionsNameWhatIsWrong) {
  auto target = TinyModel(1);  // 2 layers: EAGLE-3's own choice (2, L / 2, L - 3) does not exist
  auto fallback = MethodFromYaml("{name: m, drafter: {type: eagle3}, verifier: {type: greedy}}", target.get());
  EXPECT_THAT(std::string(fallback.status().message()), HasSubstr("drafter.feature_layers"));
  EXPECT_THAT(std::string(fallback.status().message()), HasSubstr("not distinct"));
  auto one = MethodFromYaml("{name: m, drafter: {type: eagle3, feature_layers: [1]}, verifier: {type: greedy}}",
                            target.get());
  EXPECT_THAT(std::string(one.status().message()), HasSubstr("two or more"));
  auto outside = MethodFromYaml("{name: m, drafter: {type: eagle3, feature_layers: [0, 7]}, verifier: {type: greedy}}",
                                target.get());
  EXPECT_THAT(std::string(outside.status().message()), HasSubstr("drafter.feature_layers"));
  EXPECT_TRUE(Eagle3FeatureLayers(32).ok());
  EXPECT_EQ(*Eagle3FeatureLayers(32), (std::vector<int>{2, 16, 29}));
}

// At T = 0, EAGLE-3's chains and trees are greedy decoding, step by step and
// pipelined (the fused features kept on the device); at T = 1 they keep the
// target's law of the first two tokens.
TEST(Eagle3Test, ChainsAndTreesAreExact) {
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/2, /*logit_scale=*/40);
  for (const char* parts : {"verifier: {type: greedy}, length_policy: {type: fixed, gamma: 3}",
                            "tree_builder: {type: dynamic_topk, top_k: 2, depth: 3, total_tokens: 6}, verifier: "
                            "{type: point_mass}",
                            "tree_builder: {type: static, choices: [[0], [1], [0, 0], [0, 1], [0, 0, 0]]}, verifier: "
                            "{type: point_mass}"}) {
    SCOPED_TRACE(parts);
    auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: ", kDrafter, ", ", parts, "}"), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    testing::ExpectGreedyPipelinedAndStepByStep(*target, *method, kPrompt);
  }
  const testing::TwoTokenLaw law = testing::ExactTwoTokenLaw(*target, kPrompt, 1.0);
  auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: ", kDrafter,
                                            ", tree_builder: {type: static, sampling: true, choices: [[0], [1], [0, 0]]}, "
                                            "verifier: {type: traversal}}"),
                               target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, kPrompt, law, 2000, "eagle3, traversal");
}

}  // namespace
}  // namespace speclab
