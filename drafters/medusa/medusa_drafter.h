// MedusaDrafter: Medusa-1 heads on the target's last hidden state (T. Cai et
// al., "Medusa", ICML 2024; docs/algorithms.md §4.4).
//
// Let h be the final-norm hidden state of the last token the target has
// verified (the token before the tree's root; the target's LM head on h drew
// the root). Head k (k = 0..K-1) gives the logits of the token k + 1 places
// after the root:
//   logits_k = W_k · R_k(h),   R_k = L ResBlocks, ResBlock(x) = x + SiLU(A x + b).
// A tree node at depth d is continued by head d, whatever its own token, so
// that Medusa's trees are Cartesian products of the heads' top tokens (the
// static builder with Medusa's choices). q is softmax(logits_d) processed
// with the drafting settings: a valid draft law for every verifier.
//
// Without a checkpoint the heads are Medusa's initialisation: A = 0, b = 0
// (each ResBlock is the identity) and W_k the target's LM head, read in place.
// Its device form (medusa_device.cc) draws a whole chain, or a tree's levels,
// from the heads with the builder's device pick, from a state the host has
// (DraftChain, DraftLevels) or from the path rows a pipelined step hands over
// on the device (DraftChainAt, DraftLevelsAt): the heads and the picks in one
// CUDA graph (framework/device/device_graphs.h).
//
// A checkpoint is Medusa's `medusa_lm_head.safetensors`: tensors
// "{k}.{l}.linear.weight" [hidden, hidden], "{k}.{l}.linear.bias" [hidden]
// for l < L, and "{k}.{L}.weight" [vocab, hidden]. Heads that read out
// through the target's LM head (speclab's own, trained by `speclab train`
// with `medusa_head:`) have no "{k}.{L}.weight": every head has one or none.
#ifndef SPECLAB_DRAFTERS_MEDUSA_MEDUSA_DRAFTER_H_
#define SPECLAB_DRAFTERS_MEDUSA_MEDUSA_DRAFTER_H_

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/device/device_drafter.h"
#include "framework/device/device_graphs.h"
#include "framework/drafter.h"
#include "framework/model/llama_model.h"
#include "framework/target_features.h"

namespace speclab {

struct MedusaHead {
  std::vector<at::Tensor> weights, biases;  // the ResBlocks' A and b (empty: identity)
  at::Tensor lm_head;                       // W [vocab, hidden]; undefined: the target's LM head
};

// Reads K heads of L ResBlocks from a checkpoint; errors name the file and tensor.
absl::StatusOr<std::vector<MedusaHead>> LoadMedusaHeads(const std::string& path, int heads, int layers,
                                                        const LlamaModel& target);
// Writes heads in `dtype` (a head's LM head only where it has its own).
absl::Status SaveMedusaHeads(const std::string& path, const std::vector<MedusaHead>& heads, at::ScalarType dtype);

// One head's logits [..., vocab] float32 from hidden states [..., hidden]
// (autograd flows through the head's own tensors).
at::Tensor MedusaHeadLogits(const MedusaHead& head, const LlamaModel& target, const at::Tensor& hidden);

// The Drafter interface, and its device form (framework/device/device_drafter.h).
class MedusaDrafter final : public Drafter, public DeviceDrafter {
 public:
  // `target` must outlive the drafter; it is read, never run.
  MedusaDrafter(const LlamaModel& target, std::vector<MedusaHead> heads);

  DrafterKind kind() const override { return DrafterKind::kDistributions; }
  TargetFeatureRequest target_features() const override { return {.hidden_layers = {-1}}; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  // Head d's logits for each node at depth d (the step's heads run once, on
  // first use). Before any hidden state (a one-token prompt's first step)
  // every row is zeros: q is uniform, still a valid law.
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override;
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override;

  // DeviceDrafter: head i's logits give the chain's token i + 1, drawn by
  // `pick`; at most K tokens.
  absl::StatusOr<ChainResult> DraftChain(int length, const ChainPick& pick) override;
  absl::StatusOr<ChainResult> DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick) override;
  // DeviceDrafter: a level's nodes at depth d continued by head d, whatever
  // their tokens: no forward, each level's logits rows of the heads' (at
  // most K - 1 levels).
  absl::StatusOr<LevelsKept> DraftLevels(int levels, const LevelPick& pick) override;
  absl::StatusOr<LevelsKept> DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick) override;
  DeviceGraphs* graphs() override { return &graphs_; }

  // The heads' logits [K, vocab] float32 from a hidden state [1, hidden].
  at::Tensor HeadLogits(const at::Tensor& hidden) const;

 private:
  // The chain after `root` ([1] int64 on the device) from `state` [1, hidden].
  absl::StatusOr<ChainResult> DrawChain(const at::Tensor& root, const at::Tensor& state, int length,
                                        const ChainPick& pick) const;
  // The levels after the root from `state` [1, hidden].
  absl::StatusOr<LevelsKept> GrowLevelsFrom(const at::Tensor& state, int levels, const LevelPick& pick) const;

  const LlamaModel& target_;
  std::vector<MedusaHead> heads_;
  LastFeature state_{"medusa"};  // the last verified token's final-norm hidden state
  at::Tensor step_logits_;  // [K, vocab] of this step, once computed
  mutable DeviceGraphs graphs_;  // the device form's chains and levels, as CUDA graphs
  int32_t root_ = -1;       // this step's root (BeginStep)
};

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_MEDUSA_MEDUSA_DRAFTER_H_
