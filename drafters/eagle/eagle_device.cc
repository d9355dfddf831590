// EagleDrafter's device form: a step's chain or tree levels grown on the
// device from the root BeginStep fed, each node fed its parent's prediction
// (LlamaModel's growths on features: one CUDA graph each on CUDA).
#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "drafters/eagle/eagle_drafter.h"
#include "framework/core/status_macros.h"

namespace speclab {

absl::StatusOr<FeatureRoot> EagleDrafter::GrowthRoot() {
  if (!node_logits_[0].defined())
    return absl::UnimplementedError(absl::StrCat(name(), ": no target features yet (a one-token prompt)"));
  drafted_on_device_ = true;
  return FeatureRoot{.token = at::full({1}, root_, at::TensorOptions().dtype(at::kLong).device(target_.device())),
                     .logits = node_logits_[0],
                     .feature = node_hidden_[0],
                     .position = root_position_};
}

absl::StatusOr<ChainResult> EagleDrafter::DraftChain(int length, const ChainPick& pick) {
  absl::StatusOr<FeatureRoot> root = GrowthRoot();
  if (!root.ok()) return root.status();
  return head_.body->ForwardChainOnFeatures(*root, length, pick, head_.Inputs());
}

absl::StatusOr<LevelsKept> EagleDrafter::DraftLevels(int levels, const LevelPick& pick) {
  absl::StatusOr<FeatureRoot> root = GrowthRoot();
  if (!root.ok()) return root.status();
  return head_.body->ForwardLevelsOnFeatures(*root, levels, pick, head_.Inputs());
}

absl::StatusOr<FeaturePathAt> EagleDrafter::PathAt(const DeviceRoot& root) const {
  if (root.target.hidden.size() != head_.feature_layers.size() || !root.path_length.defined() ||
      !root.context.defined())
    return absl::UnimplementedError(
        absl::StrCat(name(), ": the pipelined step handed over no target features or context"));
  // EAGLE-3's fusion runs here, outside the growth's graph: one matmul a step.
  const at::Tensor features = head_.TargetFeature(root.target.hidden);
  const int64_t w = features.size(0);
  const at::Tensor length = root.path_length.to(at::kLong).view({1});
  // The path's first token sits just after the last step's root.
  const at::Tensor first = root.position.start + 2 - length;
  const at::Tensor tokens = root.context.index_select(0, first + at::arange(w, first.options()));
  // The head's cache holds position p at slot p - 1 (position 0 has no entry).
  return FeaturePathAt{.tokens = tokens,
                       .features = features,
                       .length = length,
                       .slot = {.start = first - 1, .max_start = root.position.max_start,
                                .min_start = root.position.min_start + 1 - w},
                       .position = first};
}

absl::StatusOr<ChainResult> EagleDrafter::DraftChainAt(const DeviceRoot& root, int length,
                                                       const ChainPick& pick) {
  // (root.refeed needs nothing more: the head feeds the accepted path's
  // features again every step, whichever drafter drafted the path.)
  if (root_from_reset_) {
    root_from_reset_ = false;
    return DraftChain(length, pick);
  }
  ASSIGN_OR_RETURN(FeaturePathAt path, PathAt(root));
  return head_.body->ForwardChainOnFeaturesAt(path, length, pick, head_.Inputs());
}

absl::StatusOr<LevelsKept> EagleDrafter::DraftLevelsAt(const DeviceRoot& root, int levels,
                                                       const LevelPick& pick) {
  if (root_from_reset_) {
    root_from_reset_ = false;
    return DraftLevels(levels, pick);
  }
  ASSIGN_OR_RETURN(FeaturePathAt path, PathAt(root));
  return head_.body->ForwardLevelsOnFeaturesAt(path, levels, pick, head_.Inputs());
}

}  // namespace speclab
