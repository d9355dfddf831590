// EagleDrafter's device form: a step's chain or tree levels drawn on the
// device, the host only queueing the head's forwards, so that drafting never
// waits for a pick.
#include <ATen/ATen.h>

#include "drafters/eagle/eagle_drafter.h"
#include "framework/core/status_macros.h"

namespace speclab {

absl::StatusOr<ChainResult> EagleDrafter::DraftChain(int length, const ChainPick& pick) {
  if (!node_logits_[0].defined()) return absl::UnimplementedError("eagle: no target features yet (a one-token prompt)");
  LlamaModel& body = *head_.body;
  const c10::Device device = target_.device();
  // Node i of the chain (depth i) is fed at i's turn; the root was fed by BeginStep.
  node_hidden_.resize(length + 1);
  node_logits_.resize(length + 1);
  slot_node_.clear();
  const at::Tensor root = at::full({1}, root_, at::TensorOptions().dtype(at::kLong).device(device));
  return PickEach(root, length, target_.config().vocab_size, pick,
                  [&](int64_t i, const at::Tensor& token) -> absl::StatusOr<at::Tensor> {
                    if (i == 0) return node_logits_[0];
                    const at::Tensor inputs = head_.Fuse(token, node_hidden_[i - 1]);
                    const at::Tensor position =
                        at::full({1}, root_position_ + i, at::TensorOptions().dtype(at::kLong).device(device));
                    ASSIGN_OR_RETURN(node_logits_[i], body.ForwardEmbedded(inputs, position, at::Tensor()));
                    ASSIGN_OR_RETURN(node_hidden_[i], body.HiddenStates(-1));
                    slot_node_.push_back(static_cast<int>(i));
                    return node_logits_[i];
                  });
}

absl::StatusOr<LevelsKept> EagleDrafter::DraftLevels(int levels, const LevelPick& pick) {
  if (!node_logits_[0].defined()) return absl::UnimplementedError("eagle: no target features yet (a one-token prompt)");
  LlamaModel& body = *head_.body;
  at::Tensor predictions = node_hidden_[0];  // every fed node's f^, in feeding order (the root first)
  return GrowLevels(node_logits_[0], body.tentative_length(), levels, pick,
                    [&](const LevelFeed& level) -> absl::StatusOr<at::Tensor> {
                      const at::Tensor inputs = head_.Fuse(level.tokens, predictions.index_select(0, level.parents));
                      ASSIGN_OR_RETURN(at::Tensor logits,
                                       body.ForwardEmbedded(inputs, level.depths + root_position_, level.visible));
                      ASSIGN_OR_RETURN(at::Tensor hidden, body.HiddenStates(-1));
                      predictions = at::cat({predictions, hidden});
                      return logits;
                    });
}

}  // namespace speclab
