// The engine's delivery of target features (framework/target_features.h):
// over a generation the drafter gets every committed token's hidden states
// exactly once, in order, equal to what a plain forward of the committed
// sequence computes; and a method whose drafter reads them says why it runs
// step by step.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "drafters/model/model_drafter.h"
#include "framework/device/pipelined_steps.h"
#include "framework/speculative_decoder.h"
#include "tests/support/float_tolerance.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using ::speclab::testing::ModelDrafterMethod;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3};
const std::vector<int> kLayers = {-1, 1, 0};

// A model drafter that also reads hidden states, and keeps what it gets.
class RecordingDrafter final : public Drafter {
 public:
  explicit RecordingDrafter(std::unique_ptr<Drafter> inner) : inner_(std::move(inner)) {}
  DrafterKind kind() const override { return inner_->kind(); }
  TargetFeatureRequest target_features() const override { return {.hidden_layers = kLayers}; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override {
    received_.clear();
    Record(target, prompt.size() - 1);
    return inner_->Reset(prompt, {});
  }
  absl::Status BeginStep(absl::Span<const int32_t> context) override { return inner_->BeginStep(context); }
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override {
    return inner_->NextTokenLogits(tree, nodes, node_tokens);
  }
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override {
    Record(target, accepted_path.size());
    return inner_->EndStep(tree, accepted_path, {});
  }
  std::vector<LanguageModel*> models() override { return inner_->models(); }

  // Every layer's rows, concatenated in the order received.
  std::vector<at::Tensor> received() const {
    std::vector<at::Tensor> out;
    for (size_t l = 0; l < kLayers.size(); ++l) {
      std::vector<at::Tensor> rows;
      for (const TargetFeatures& f : received_) rows.push_back(f.hidden[l].cpu());
      out.push_back(at::cat(rows));
    }
    return out;
  }

 private:
  void Record(const TargetFeatures& target, size_t rows) {
    EXPECT_EQ(target.hidden.size(), kLayers.size());
    for (const at::Tensor& t : target.hidden) EXPECT_EQ(t.size(0), static_cast<int64_t>(rows));
    received_.push_back(target);
  }

  std::unique_ptr<Drafter> inner_;
  std::vector<TargetFeatures> received_;
};

void ExpectEveryCommittedToken(const std::string& builder, const std::string& verifier, double temperature,
                               const std::string& engine_form) {
  SCOPED_TRACE(builder + " + " + verifier);
  auto target = TinyModel(1);
  Method method = ModelDrafterMethod(TinyModel(2), builder, verifier, 3);
  auto recording = std::make_unique<RecordingDrafter>(std::move(method.drafter));
  RecordingDrafter& drafter = *recording;
  method.drafter = std::move(recording);
  auto out = GenerateSpeculative(*target, method, kPrompt,
                                 {.sampling = {.temperature = temperature}, .max_new_tokens = 20, .seed = 3});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->engine_form, HasSubstr(engine_form));

  // The committed sequence is the prompt and every emitted token but the
  // last, unless the budget cut a step's path short: compare what was fed.
  std::vector<int64_t> sequence(kPrompt.begin(), kPrompt.end());
  sequence.insert(sequence.end(), out->tokens.begin(), out->tokens.end() - 1);
  const std::vector<at::Tensor> received = drafter.received();
  const int64_t rows = received[0].size(0);
  ASSERT_GE(rows, static_cast<int64_t>(kPrompt.size()));
  ASSERT_LE(rows, static_cast<int64_t>(sequence.size()));
  auto reference = TinyModel(1);
  ASSERT_TRUE(reference->KeepHiddenStates(kLayers).ok());
  const at::Tensor tokens = at::tensor(std::vector<int64_t>(sequence.begin(), sequence.begin() + rows), at::kLong);
  ASSERT_TRUE(reference->Forward(tokens, at::arange(rows, at::kLong), at::Tensor()).ok());
  // A step's rows come from a tree forward, the reference's from one chain:
  // two forwards of the same model, within the forward's bound.
  const double tolerance = testing::ForwardTolerance(target->config(), rows, testing::UnitRoundoff(at::kFloat));
  for (size_t l = 0; l < kLayers.size(); ++l) {
    const at::Tensor want = reference->HiddenStates(kLayers[l])->cpu();
    const double error = (received[l] - want).abs().max().item<double>() / want.abs().max().item<double>();
    EXPECT_LT(error, tolerance) << "hidden state " << kLayers[l];
  }
}

TEST(TargetFeaturesTest, ChainsDeliverEveryCommittedToken) {
  // The recording drafter has no device form: its chains run step by step.
  ExpectEveryCommittedToken("{type: chain}", "{type: rejection}", 1.0, "the drafter has no device form");
  ExpectEveryCommittedToken("{type: chain}", "{type: greedy}", 0.0, "the drafter has no device form");
}

TEST(TargetFeaturesTest, TreesDeliverTheAcceptedPath) {
  ExpectEveryCommittedToken("{type: static, sampling: true, choices: [[0], [1], [0, 0], [1, 0], [0, 0, 0]]}",
                            "{type: traversal}", 1.0, "cannot draft from a root on the device");
  ExpectEveryCommittedToken("{type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 8}", "{type: point_mass}", 1.0,
                            "cannot draft from a root on the device");
}

// Pipelined chains and trees hand target features to the drafter's device
// form (drafters/medusa/medusa_drafter_test.cc and
// drafters/eagle/eagle_drafter_test.cc check them): reading them keeps no
// method off the device.
TEST(TargetFeaturesTest, ReadingThemKeepsNoMethodOffTheDevice) {
  for (const auto& [builder, verifier, trees] :
       {std::make_tuple("{type: chain}", "{type: rejection}", false),
        std::make_tuple("{type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 8}", "{type: point_mass}", true)}) {
    Method method = ModelDrafterMethod(TinyModel(2), builder, verifier, 3);
    method.drafter = std::make_unique<RecordingDrafter>(std::move(method.drafter));
    method.drafter_name = "recording";
    EXPECT_TRUE(PartsWithoutDeviceForms(method, trees).empty()) << builder;
  }
}

}  // namespace
}  // namespace speclab
