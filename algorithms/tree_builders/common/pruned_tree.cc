#include "algorithms/tree_builders/common/pruned_tree.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"

namespace speclab {
namespace tree_builders {

TokenTree ScratchTree(int32_t root_token, int reserved) {
  TokenTree tree(root_token);
  for (int i = 0; i < reserved; ++i) tree.AddNode(0, 0);
  return tree;
}

std::vector<int> BestCandidates(const std::vector<Candidate>& candidates, int keep) {
  std::vector<int> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t n = std::min<size_t>(std::max(keep, 0), order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](int a, int b) {
    return candidates[a].score != candidates[b].score ? candidates[a].score > candidates[b].score : a < b;
  });
  order.resize(n);
  return order;
}

absl::StatusOr<DraftTree> TreeFromCandidates(int32_t root_token, const std::vector<Candidate>& candidates,
                                             std::vector<int> selected, c10::Device device) {
  std::sort(selected.begin(), selected.end());
  std::vector<int> node_of(candidates.size(), -1);
  DraftTree out;
  out.tree = TokenTree(root_token);
  for (int c : selected) {
    const int parent = candidates[c].parent;
    const int parent_node = parent < 0 ? 0 : node_of[parent];
    if (parent_node < 0)
      return absl::InternalError(absl::StrCat("candidate ", c, " was kept without its parent ", parent));
    node_of[c] = out.tree.AddNode(parent_node, candidates[c].token);
  }
  out.tokens = TokensToDevice(out.tree.tokens(), device);
  out.sampling = DraftSampling::kDeterministic;
  return out;
}

DraftTree KeptOnDevice(const BuildRequest& request, const DeviceRoot* root, const std::vector<at::Tensor>& kept,
                       int64_t depth_bound) {
  DraftTree draft;
  draft.tree = TokenTree(request.root_token);
  const at::Tensor root_token = root != nullptr ? root->last_two.narrow(0, 1, 1).to(kept[0].device())
                                                : at::full({1}, request.root_token, kept[0].options());
  draft.tokens = at::cat({root_token, kept[0]});
  draft.sampling = DraftSampling::kDeterministic;
  draft.device_shape = DraftTree::DeviceShape{.parents = kept[1], .depths = kept[2], .mask = kept[3],
                                              .depth_bound = depth_bound};
  return draft;
}

absl::StatusOr<std::optional<DraftTree>> DraftLevelsKeptOnDevice(DeviceDrafter& device, const BuildRequest& request,
                                                                 const DeviceRoot* root, int levels,
                                                                 const LevelPick& pick, int64_t depth_bound) {
  absl::StatusOr<LevelsKept> grown =
      root != nullptr ? device.DraftLevelsAt(*root, levels, pick) : device.DraftLevels(levels, pick);
  if (grown.status().code() == absl::StatusCode::kUnimplemented) return std::nullopt;
  if (!grown.ok()) return grown.status();
  return KeptOnDevice(request, root, grown->back(), depth_bound);
}

}  // namespace tree_builders
}  // namespace speclab
