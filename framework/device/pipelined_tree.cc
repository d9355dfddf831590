#include "framework/device/pipelined_tree.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_tree_builder.h"
#include "framework/device_transfer.h"
#include "framework/device/device_verifier.h"
#include "framework/model/fused_ops.h"

namespace speclab {

absl::Status PipelinedTree::Check(absl::Span<const int32_t> prompt) {
  if (prompt.size() < 2) return absl::FailedPreconditionError("the prompt has fewer than two tokens");
  return absl::OkStatus();
}

PipelinedTree::PipelinedTree(DeviceModel& target, Method& method, const SamplingParams& sampling,
                             absl::Span<const int32_t> prompt, int max_new_tokens, at::Generator& draft_generator,
                             at::Generator& verify_generator)
    : PipelinedSteps(target, method, sampling, prompt, draft_generator, verify_generator),
      room_needed_(static_cast<int64_t>(prompt.size()) + max_new_tokens) {}

absl::StatusOr<std::optional<at::Tensor>> PipelinedTree::Queue(int64_t min_root, int64_t max_root) {
  const c10::Device device = target().device();
  ASSIGN_OR_RETURN(std::optional<DraftTree> draft, DraftAt(min_root, max_root));
  if (!draft) return std::nullopt;
  if (!draft->device_shape) return absl::InternalError("pipelined tree: the builder's tree is not on the device");
  const DraftTree::DeviceShape& shape = *draft->device_shape;
  const at::Tensor tokens = draft->tokens.to(device);
  // The tree's size may move from step to step (a builder whose size follows
  // a length policy that observes late): each step is checked on its own; a
  // first step that does not fit is refused (step by step instead), a later
  // one is an error naming the limit.
  const int64_t n = tokens.size(0);
  const int64_t depth = shape.depth_bound >= 1 ? std::min(shape.depth_bound, n - 1) : n - 1;
  // The drafter's riders (lookahead's window) follow the nodes in the forward.
  ASSIGN_OR_RETURN(const DeviceRiders riders, RidersOfStep());
  const int64_t r = riders.size();
  std::string unfit;
  if (n < 2 || n + r > kMaxTreeNodes) {
    unfit = absl::StrCat("the tree has ", n, " nodes", r > 0 ? absl::StrCat(" and ", r, " riders") : "",
                         ", outside [2, ", kMaxTreeNodes, "]");
  } else if (room_needed_ + depth + 1 + n + r > target().capacity()) {
    unfit = absl::StrCat("a queued tree needs ", room_needed_ + depth + 1 + n + r, " KV slots, past the capacity ",
                         target().capacity(), " (models.kv_capacity)");
  }
  if (!unfit.empty()) {
    if (queued_ > 0) return absl::FailedPreconditionError(absl::StrCat("pipelined tree, step ", queued_ + 1, ": ", unfit));
    Refuse(unfit);
    return std::nullopt;
  }
  ++queued_;
  path_length_ = depth + 1;
  const DevicePosition at = RootAt(min_root, max_root);
  ASSIGN_OR_RETURN(at::Tensor logits,
                   ForwardTreeWithRiders(tokens, shape.depths.to(device), shape.mask.to(device), at, riders));
  const at::Tensor parents = shape.parents.to(device);
  const int64_t draft_top_k = method().drafter_sampling.For(sampling()).top_k;
  DeviceTreeProblem problem{.tokens = tokens, .parents = parents, .target_probs = TargetRows(logits, sampling()),
                            .draft_probs = draft->draft_probs, .sampling = draft->sampling,
                            .greedy = sampling().greedy(), .branching_bound = shape.branching_bound,
                            .draft_support_bound = draft_top_k > 0 ? draft_top_k : -1};
  ASSIGN_OR_RETURN(at::Tensor walk, method().device_verifier->VerifyTree(problem, verify_generator()));
  // The accepted path's target features (the root's row, then each accepted
  // node's; rows past the path repeat the root's), for drafters that read them.
  if (reads_target_features())
    RETURN_IF_ERROR(KeepPathFeatures(walk.narrow(0, 0, 1) + 1,
                                     at::cat({at::zeros({1}, walk.options()), walk.narrow(0, 1, path_length_ - 1)})));
  // The accepted path becomes context: its cache entries move into place,
  // and its tokens, then the extra token, follow the root in context_.
  RETURN_IF_ERROR(target_device().CompactPathAt(walk.narrow(0, 1, path_length_ - 1), at));
  fused::TreeRootAdvance next = fused::AdvanceTreeRoot(walk, tokens, parents, positions(), context());
  AdvanceTo(std::move(next.last_two), std::move(next.positions));
  // A tree filled past the nodes its builder drafted carries their count.
  if (draft->drafted_nodes.defined()) return at::cat({next.record, draft->drafted_nodes.to(device, at::kLong)});
  return next.record;
}

absl::StatusOr<PipelinedRead> PipelinedTree::Read(const at::Tensor& host_record) const {
  // Queue()'s layout, [3n + 1] (tokens, parents, walk), or [3n + 2] with the
  // drafted nodes' count last: the step's size is in the record.
  const int64_t values = host_record.numel();
  const bool counted = values % 3 == 2;
  const int64_t n = (values - (counted ? 2 : 1)) / 3;
  if (n < 2 || (values % 3 != 1 && !counted))
    return absl::InternalError(absl::StrCat("pipelined tree: a record of ", values, " values"));
  const int64_t* tokens = host_record.data_ptr<int64_t>();
  const int64_t* parents = tokens + n;
  const int64_t* walk = parents + n;
  const int64_t drafted = counted ? walk[n + 1] : n - 1;
  if (drafted < 0 || drafted > n - 1)
    return absl::InternalError(absl::StrCat("pipelined tree: ", drafted, " drafted nodes of ", n - 1));
  PipelinedRead read{.tree_nodes = static_cast<int>(drafted)};
  std::vector<int> depth(n, 0);
  for (int64_t i = 1; i < n; ++i) {
    if (parents[i] < 0 || parents[i] >= i)
      return absl::InternalError(absl::StrCat("pipelined tree: node ", i, " has parent ", parents[i]));
    depth[i] = depth[parents[i]] + 1;
    if (i <= read.tree_nodes) read.longest_path = std::max(read.longest_path, depth[i]);  // (drafted nodes first)
  }
  if (walk[0] < 0 || walk[0] > read.longest_path)
    return absl::InternalError(absl::StrCat("device verifier accepted ", walk[0], " of ", n - 1, " drafts"));
  for (int64_t i = 1; i <= walk[0]; ++i) {
    if (walk[i] < 1 || walk[i] >= n || parents[walk[i]] != (i == 1 ? 0 : walk[i - 1]))
      return absl::InternalError(absl::StrCat("device verifier accepted node ", walk[i], ", not a child of the last"));
    read.emitted.push_back(static_cast<int32_t>(tokens[walk[i]]));
  }
  read.emitted.push_back(static_cast<int32_t>(walk[n]));
  return read;
}

}  // namespace speclab
