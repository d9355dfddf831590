// EagleDrafter: EAGLE's head drafting chains and trees (docs/algorithms.md
// §4.12): the head (eagle_head.h) autoregresses on features, the target's
// for committed tokens and its own predictions for drafted ones.
//
// Over a generation the head's KV cache holds one entry per committed token
// p >= 1, computed from the target's true feature f_{p-1} (the engine hands
// them over: framework/target_features.h). A step:
//   - BeginStep feeds the tokens committed since the last step with the
//     features of the tokens before them, and keeps the root's prediction
//     f^_root, whose readout is q after the root (Reset feeds the prompt's
//     this way, with the prefill);
//   - each node n of the tree is fed (its token, f^_parent(n)) at position
//     root + depth(n), attending to the committed entries and to its
//     ancestors' (tree attention over the step's tentative entries); its
//     readout is q after n;
//   - EndStep keeps the accepted path's target features for the next
//     BeginStep, which drops the drafted entries (EAGLE recomputes accepted
//     tokens' entries from the target's features rather than keep the
//     head's own).
// Before any feature (a one-token prompt's first step) every row is zeros:
// q is uniform, still a valid draft law.
//
// Its device form (eagle_device.cc) draws a step's chain with the builder's
// device pick (one head forward per token), or grows a tree level by level
// (one head forward per level, the tree's attention mask built on the
// device), with no host read in between: on CUDA one CUDA graph a step
// (LlamaModel::ForwardChainOnFeatures, ForwardLevelsOnFeatures). A step
// drafted there is extended no further by NextTokenLogits. Its pipelined
// form (DraftChainAt, DraftLevelsAt) feeds the tokens committed since the
// last step with the target features the engine kept on the device, then
// grows from the root, all in one graph (the first pipelined step grows
// from the root Reset fed).
#ifndef SPECLAB_DRAFTERS_EAGLE_EAGLE_DRAFTER_H_
#define SPECLAB_DRAFTERS_EAGLE_EAGLE_DRAFTER_H_

#include <ATen/core/Tensor.h>

#include <vector>

#include "absl/status/statusor.h"
#include "drafters/eagle/eagle_head.h"
#include "framework/device/device_drafter.h"
#include "framework/drafter.h"

namespace speclab {

// The Drafter interface, and its device form (framework/device/device_drafter.h).
class EagleDrafter final : public Drafter, public DeviceDrafter {
 public:
  // `target` must outlive the drafter; it is read (its embedding, final norm
  // and LM head), never run.
  EagleDrafter(const LlamaModel& target, EagleHead head);

  DrafterKind kind() const override { return DrafterKind::kDistributions; }
  TargetFeatureRequest target_features() const override { return {.hidden_layers = head_.feature_layers}; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override;
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override;
  std::vector<LanguageModel*> models() override { return {head_.body.get()}; }

  // DeviceDrafter: the chain's token i + 1 drawn by `pick` from the readout
  // after token i, each token fed with its parent's prediction.
  absl::StatusOr<ChainResult> DraftChain(int length, const ChainPick& pick) override;
  // DeviceDrafter: each level's nodes fed with their parents' predictions.
  absl::StatusOr<LevelsKept> DraftLevels(int levels, const LevelPick& pick) override;
  // DeviceDrafter: the forms above after feeding the path the last pipelined
  // step accepted (DeviceRoot::target, path_length and context).
  absl::StatusOr<ChainResult> DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick) override;
  absl::StatusOr<LevelsKept> DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick) override;

 private:
  // The registry name, for messages: eagle3 for a fusing head.
  const char* name() const { return head_.fuses() ? "eagle3" : "eagle"; }
  // InvalidArgument unless `target` holds the head's feature layers, `rows` rows each.
  absl::Status CheckFeatures(const TargetFeatures& target, int64_t rows, const char* of_what) const;
  // The root of a device growth; marks the step as drafted on the device.
  absl::StatusOr<FeatureRoot> GrowthRoot();
  // The path a pipelined step feeds before it grows: the tokens from the
  // last step's root (exclusive) to this one's (inclusive), each with the
  // target's feature of the token before it.
  absl::StatusOr<FeaturePathAt> PathAt(const DeviceRoot& root) const;

  // Feeds `nodes` (whose parents are fed) as one forward of the head.
  // Their tentative entries take the next slots.
  absl::Status FeedNodes(const TokenTree& tree, const std::vector<int>& nodes, const at::Tensor& tokens);

  const LlamaModel& target_;
  EagleHead head_;
  at::Tensor pending_;  // [m, hidden]: target features of the tokens before the next m context tokens
  int64_t fed_ = 0;     // context tokens whose entries the head's cache holds (position 0 has none: counted)
  int64_t root_position_ = -1;
  // The root's readout came from Reset, and no step has grown from it yet.
  bool root_from_reset_ = false;
  int32_t root_ = 0;  // this step's root token
  // This step: per tree node its prediction f^ [1, hidden] and readout
  // [1, vocab], undefined until it is fed; the root's come from BeginStep.
  std::vector<at::Tensor> node_hidden_, node_logits_;
  std::vector<int> slot_node_;  // the node of each tentative slot, in feeding order
  // This step's tree was grown by the device form, whose nodes the host
  // state above does not hold.
  bool drafted_on_device_ = false;
};

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_EAGLE_EAGLE_DRAFTER_H_
