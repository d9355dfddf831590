// HydraDrafter's device form: chains and tree levels drawn from the heads on
// the device, with no host read, so that Hydra's methods run pipelined.
#include <ATen/ATen.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/hydra/hydra_drafter.h"
#include "framework/core/status_macros.h"

namespace speclab {

absl::StatusOr<ChainResult> HydraDrafter::DrawChain(const at::Tensor& root, const at::Tensor& state, int length,
                                                    const ChainPick& pick) const {
  if (length < 1 || length > static_cast<int>(heads_.size()))
    return absl::InvalidArgumentError(
        absl::StrCat("hydra: a chain of ", length, " tokens needs as many heads; there are ", heads_.size()));
  const int64_t vocab = target_.config().vocab_size;
  std::vector<at::Tensor> inputs{root.to(at::kLong).view({1}), state};
  if (at::Tensor noise = ChainNoise(pick, length, vocab, root.device()); noise.defined()) inputs.push_back(noise);
  ASSIGN_OR_RETURN(DeviceOutputs out,
                   graphs_.Run(std::make_tuple(pick, static_cast<int64_t>(length)), inputs,
                               [&](const std::vector<at::Tensor>& in) -> absl::StatusOr<DeviceOutputs> {
                                 const at::Tensor noise = in.size() > 2 ? in[2] : at::Tensor();
                                 std::vector<at::Tensor> head_inputs{in[1]};  // h, then each token's embedding
                                 ASSIGN_OR_RETURN(
                                     ChainResult chain,
                                     PickEach(in[0], length, vocab, pick,
                                              [&](int64_t i, const at::Tensor& token) -> absl::StatusOr<at::Tensor> {
                                                head_inputs.push_back(target_.Embed(token.view({1})));
                                                return HydraHeadLogits(heads_[i], target_, at::cat(head_inputs, 1));
                                              },
                                              &noise));
                                 return DeviceOutputs{.tensors = {chain.tokens, chain.rows, chain.kept}};
                               }));
  return ChainResult{.tokens = out.tensors[0], .rows = out.tensors[1], .kept = out.tensors[2]};
}

at::Tensor HydraDrafter::RootOnDevice() const {
  return at::full({1}, root_, at::TensorOptions().dtype(at::kLong).device(target_.device()));
}

absl::StatusOr<ChainResult> HydraDrafter::DraftChain(int length, const ChainPick& pick) {
  if (!state_.row().defined()) return absl::UnimplementedError("hydra: no hidden state yet (a one-token prompt)");
  return DrawChain(RootOnDevice(), state_.row(), length, pick);
}

absl::StatusOr<ChainResult> HydraDrafter::DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick) {
  ASSIGN_OR_RETURN(at::Tensor state, FeatureBeforeRoot(root, "hydra"));
  return DrawChain(root.last_two.narrow(0, 1, 1), state, length, pick);
}

// Every fed node's path is kept as embeddings [nodes, K, hidden] (slot d: the
// token at depth d, zeros below the node), so that a level's rows are its
// parents' with one slot filled; a node at depth d is continued by head d on
// the path's first d + 1 slots.
absl::StatusOr<LevelsKept> HydraDrafter::GrowLevelsFrom(const at::Tensor& root, const at::Tensor& state, int levels,
                                                        const LevelPick& pick) const {
  const int64_t heads = static_cast<int64_t>(heads_.size());
  if (levels < 1 || levels >= heads)
    return absl::InvalidArgumentError(
        absl::StrCat("hydra: a tree of depth ", levels + 1, " needs as many heads; there are ", heads));
  std::vector<at::Tensor> inputs{root.to(at::kLong).view({1}), state};
  if (at::Tensor noise = LevelNoise(pick, levels, target_.config().vocab_size, state.device()); noise.defined())
    inputs.push_back(noise);
  ASSIGN_OR_RETURN(
      DeviceOutputs out,
      graphs_.Run(std::make_tuple(pick, static_cast<int64_t>(levels)), inputs,
                  [&](const std::vector<at::Tensor>& in) -> absl::StatusOr<DeviceOutputs> {
                    const at::Tensor& h = in[1];
                    const int64_t hidden = h.size(1);
                    const at::Tensor noise = in.size() > 2 ? in[2] : at::Tensor();
                    const at::Tensor root_embedding = target_.Embed(in[0]);  // [1, hidden]
                    at::Tensor paths = at::cat({root_embedding.unsqueeze(1),
                                                at::zeros({1, heads - 1, hidden}, root_embedding.options())},
                                               1);
                    const at::Tensor root_logits = HydraHeadLogits(heads_[0], target_, at::cat({h, root_embedding}, 1));
                    ASSIGN_OR_RETURN(
                        LevelsKept kept,
                        GrowLevels(root_logits, /*tentative=*/0, levels, pick,
                                   [&](const LevelFeed& feed) -> absl::StatusOr<at::Tensor> {
                                     const int64_t level = feed.level, width = feed.tokens.size(0);
                                     const at::Tensor slot =
                                         at::one_hot(feed.depths, heads).to(paths.scalar_type()).unsqueeze(-1);
                                     const at::Tensor rows = paths.index_select(0, feed.parents) * (1 - slot) +
                                                             slot * target_.Embed(feed.tokens).unsqueeze(1);
                                     paths = at::cat({paths, rows});
                                     // The head of the level's depth, or of every depth its nodes may have.
                                     std::vector<at::Tensor> by_depth;
                                     for (int64_t d = feed.at_level_depth ? level : 1; d <= std::min(level, heads - 1);
                                          ++d) {
                                       const at::Tensor path = rows.narrow(1, 0, d + 1).reshape({width, -1});
                                       by_depth.push_back(HydraHeadLogits(
                                           heads_[d], target_, at::cat({h.expand({width, hidden}), path}, 1)));
                                     }
                                     if (by_depth.size() == 1) return by_depth[0];
                                     const at::Tensor stacked = at::stack(by_depth);  // [depths, width, vocab]
                                     const at::Tensor which =
                                         (feed.depths - 1).view({1, width, 1}).expand({1, width, stacked.size(2)});
                                     return stacked.gather(0, which).squeeze(0);
                                   },
                                   &noise));
                    return LevelsAsOutputs(kept);
                  }));
  return LevelsFromOutputs(out);
}

absl::StatusOr<LevelsKept> HydraDrafter::DraftLevels(int levels, const LevelPick& pick) {
  if (!state_.row().defined()) return absl::UnimplementedError("hydra: no hidden state yet (a one-token prompt)");
  return GrowLevelsFrom(RootOnDevice(), state_.row(), levels, pick);
}

absl::StatusOr<LevelsKept> HydraDrafter::DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick) {
  ASSIGN_OR_RETURN(at::Tensor state, FeatureBeforeRoot(root, "hydra"));
  return GrowLevelsFrom(root.last_two.narrow(0, 1, 1), state, levels, pick);
}

}  // namespace speclab
