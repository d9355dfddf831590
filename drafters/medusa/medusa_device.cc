// MedusaDrafter's device form: a chain drawn from the heads on the device,
// with no host read, so that chains with Medusa heads run pipelined.
#include <ATen/ATen.h>

#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/medusa/medusa_drafter.h"
#include "framework/core/status_macros.h"

namespace speclab {

absl::StatusOr<ChainResult> MedusaDrafter::DrawChain(const at::Tensor& root, const at::Tensor& state, int length,
                                                     const ChainPick& pick) const {
  if (length < 1 || length > static_cast<int>(heads_.size()))
    return absl::InvalidArgumentError(absl::StrCat("medusa: a chain of ", length, " tokens needs as many heads; there are ",
                                                   heads_.size()));
  const int64_t vocab = target_.config().vocab_size;
  std::vector<at::Tensor> inputs{root.to(at::kLong).view({1}), state};
  if (at::Tensor noise = ChainNoise(pick, length, vocab, root.device()); noise.defined()) inputs.push_back(noise);
  ASSIGN_OR_RETURN(DeviceOutputs out,
                   graphs_.Run(std::make_tuple(pick, static_cast<int64_t>(length)), inputs,
                               [&](const std::vector<at::Tensor>& in) -> absl::StatusOr<DeviceOutputs> {
                                 const at::Tensor logits = HeadLogits(in[1]);  // [K, vocab]: head i gives token i + 1
                                 const at::Tensor noise = in.size() > 2 ? in[2] : at::Tensor();
                                 ASSIGN_OR_RETURN(ChainResult chain,
                                                  PickEach(in[0], length, vocab, pick,
                                                           [&](int64_t i, const at::Tensor&) -> absl::StatusOr<at::Tensor> {
                                                             return logits.narrow(0, i, 1);
                                                           },
                                                           &noise));
                                 return DeviceOutputs{.tensors = {chain.tokens, chain.rows, chain.kept}};
                               }));
  return ChainResult{.tokens = out.tensors[0], .rows = out.tensors[1], .kept = out.tensors[2]};
}

absl::StatusOr<ChainResult> MedusaDrafter::DraftChain(int length, const ChainPick& pick) {
  if (!state_.row().defined()) return absl::UnimplementedError("medusa: no hidden state yet (a one-token prompt)");
  const c10::Device device = target_.device();
  const at::Tensor root = at::full({1}, root_, at::TensorOptions().dtype(at::kLong).device(device));
  return DrawChain(root, state_.row(), length, pick);
}

absl::StatusOr<ChainResult> MedusaDrafter::DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick) {
  ASSIGN_OR_RETURN(at::Tensor state, FeatureBeforeRoot(root, "medusa"));
  return DrawChain(root.last_two.narrow(0, 1, 1), state, length, pick);
}

absl::StatusOr<LevelsKept> MedusaDrafter::GrowLevelsFrom(const at::Tensor& state, int levels,
                                                         const LevelPick& pick) const {
  if (levels < 1 || levels >= static_cast<int>(heads_.size()))
    return absl::InvalidArgumentError(absl::StrCat("medusa: a tree of depth ", levels + 1, " needs as many heads; there are ",
                                                   heads_.size()));
  std::vector<at::Tensor> inputs{state};
  if (at::Tensor noise = LevelNoise(pick, levels, target_.config().vocab_size, state.device()); noise.defined())
    inputs.push_back(noise);
  ASSIGN_OR_RETURN(
      DeviceOutputs out,
      graphs_.Run(std::make_tuple(pick, static_cast<int64_t>(levels)), inputs,
                  [&](const std::vector<at::Tensor>& in) -> absl::StatusOr<DeviceOutputs> {
                    const at::Tensor logits = HeadLogits(in[0]);  // [K, vocab]: head d continues every node at depth d
                    const at::Tensor noise = in.size() > 1 ? in[1] : at::Tensor();
                    ASSIGN_OR_RETURN(LevelsKept kept,
                                     GrowLevels(logits.narrow(0, 0, 1), /*tentative=*/0, levels, pick,
                                                [&](const LevelFeed& level) -> absl::StatusOr<at::Tensor> {
                                                  return logits.index_select(0, level.depths);
                                                },
                                                &noise));
                    return LevelsAsOutputs(kept);
                  }));
  return LevelsFromOutputs(out);
}

absl::StatusOr<LevelsKept> MedusaDrafter::DraftLevels(int levels, const LevelPick& pick) {
  if (!state_.row().defined()) return absl::UnimplementedError("medusa: no hidden state yet (a one-token prompt)");
  return GrowLevelsFrom(state_.row(), levels, pick);
}

absl::StatusOr<LevelsKept> MedusaDrafter::DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick) {
  ASSIGN_OR_RETURN(at::Tensor state, FeatureBeforeRoot(root, "medusa"));
  return GrowLevelsFrom(state, levels, pick);
}

}  // namespace speclab
