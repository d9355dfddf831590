// HydraDrafter: Hydra's sequentially dependent draft heads (Z. Ankner et al.,
// "Hydra: Sequentially-Dependent Draft Heads for Medusa Decoding", 2024;
// docs/algorithms.md §4.13).
//
// Medusa's heads all read one state, so head k cannot know what heads 0..k-1
// proposed. Hydra's head k also reads the embeddings of the tokens drafted
// before it. Let h be the final-norm hidden state of the last token the
// target verified (its LM head on h drew the root r = x_1), and x_1 .. x_d
// the path from the root to a node at depth d - 1. Head d - 1 continues that
// node:
//   u      = [h, E(x_1), ..., E(x_d)]                (d + 1) * hidden inputs
//   y      = P u + c + SiLU(A u + b)                  the first ResBlock, its
//                                                     residual projected down
//   y      = y + SiLU(A_l y + b_l), l = 1 .. L - 1    further ResBlocks
//   logits = W y (+ w)                                the head's own LM head,
//                                                     or the target's
// with E the target's input embeddings. A tree node at depth d is continued by
// head d; a chain's token i + 1 comes from head i. q is softmax(logits)
// processed with the drafting settings: a valid draft law for every verifier.
//
// Without a checkpoint every head starts where speclab's trainer starts it:
// A = 0, b = 0, P = [I 0 ... 0], c = 0 (each head is Medusa's initial head: the
// target's LM head on h).
//
// A checkpoint holds, for head k < K: "hydra_mlp.{k}.0.linear.weight"
// [hidden, (k + 2) * hidden] and ".bias" [hidden],
// "hydra_mlp.{k}.0.res_connection.weight" / ".bias" (the same shapes),
// "hydra_mlp.{k}.{l}.linear.weight" [hidden, hidden] / ".bias" for 0 < l < L,
// and, for heads with their own LM head (every head or none),
// "hydra_lm_head.{k}.weight" [vocab, hidden] and optionally ".bias" [vocab].
//
// Its device form (hydra_device.cc) draws a whole chain, or a tree's levels,
// with the builder's device pick from a state the host has (DraftChain,
// DraftLevels) or from the path rows a pipelined step hands over on the
// device (DraftChainAt, DraftLevelsAt): the heads and the picks in one CUDA
// graph (framework/device/device_graphs.h).
#ifndef SPECLAB_DRAFTERS_HYDRA_HYDRA_DRAFTER_H_
#define SPECLAB_DRAFTERS_HYDRA_HYDRA_DRAFTER_H_

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

struct HydraHead {
  at::Tensor in_weight, in_bias;    // A [hidden, inputs], b: the first ResBlock's linear
  at::Tensor res_weight, res_bias;  // P [hidden, inputs], c: its residual, projected
  std::vector<at::Tensor> weights, biases;  // further ResBlocks [hidden, hidden], [hidden]
  at::Tensor lm_head, lm_bias;      // W [vocab, hidden], w [vocab]; undefined: the target's LM head
};

// Head k's start (see above): zeros but P = [I 0 ... 0], in the target's
// parameter dtype and device, with `layers` ResBlocks.
HydraHead InitialHydraHead(const LlamaModel& target, int k, int layers);

// Reads K heads of L ResBlocks; errors name the file and tensor.
absl::StatusOr<std::vector<HydraHead>> LoadHydraHeads(const std::string& path, int heads, int layers,
                                                      const LlamaModel& target);
// Writes heads in `dtype` (an LM head only where a head has its own).
absl::Status SaveHydraHeads(const std::string& path, const std::vector<HydraHead>& heads, at::ScalarType dtype);

// A head's logits [..., vocab] float32 from its inputs [..., inputs]: the
// state h, then the path's embeddings (autograd flows through the head's own
// tensors).
at::Tensor HydraHeadLogits(const HydraHead& head, const LlamaModel& target, const at::Tensor& inputs);

// The Drafter interface, and its device form (framework/device/device_drafter.h).
class HydraDrafter final : public Drafter, public DeviceDrafter {
 public:
  // `target` must outlive the drafter; it is read, never run.
  HydraDrafter(const LlamaModel& target, std::vector<HydraHead> heads);

  DrafterKind kind() const override { return DrafterKind::kDistributions; }
  TargetFeatureRequest target_features() const override { return {.hidden_layers = {-1}}; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  // Head d's logits for each node at depth d, on its path from the root
  // (the tokens of nodes listed earlier in the step, as they were given).
  // Before any hidden state (a one-token prompt's first step) every row is
  // zeros: q is uniform, still a valid law.
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override;
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override;

  // DeviceDrafter: head i, reading the chain's tokens 0..i, gives token
  // i + 1, drawn by `pick`; at most K tokens.
  absl::StatusOr<ChainResult> DraftChain(int length, const ChainPick& pick) override;
  absl::StatusOr<ChainResult> DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick) override;
  // DeviceDrafter: a node at depth d continued by head d on its path (at
  // most K - 1 levels).
  absl::StatusOr<LevelsKept> DraftLevels(int levels, const LevelPick& pick) override;
  absl::StatusOr<LevelsKept> DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick) override;
  DeviceGraphs* graphs() override { return &graphs_; }

  // Head k's logits [n, vocab] float32 from states [n, hidden] (or [1,
  // hidden], shared) and the paths' tokens [n, k + 1] int64, root first.
  at::Tensor HeadLogits(int k, const at::Tensor& state, const at::Tensor& path_tokens) const;

 private:
  absl::StatusOr<ChainResult> DrawChain(const at::Tensor& root, const at::Tensor& state, int length,
                                        const ChainPick& pick) const;
  absl::StatusOr<LevelsKept> GrowLevelsFrom(const at::Tensor& root, const at::Tensor& state, int levels,
                                            const LevelPick& pick) const;
  // This step's root ([1] int64 on the target's device), for the host-state forms.
  at::Tensor RootOnDevice() const;

  const LlamaModel& target_;
  std::vector<HydraHead> heads_;
  LastFeature state_{"hydra"};  // the last verified token's final-norm hidden state
  std::vector<at::Tensor> step_tokens_;  // by node, [1] int64 on the device: the tokens listed this step
  mutable DeviceGraphs graphs_;  // the device form's chains and levels, as CUDA graphs
  int32_t root_ = -1;            // this step's root (BeginStep)
};

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_HYDRA_HYDRA_DRAFTER_H_
