#include "algorithms/tree_builders/common/shape_levels.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cfloat>
#include <tuple>
#include <utility>

#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/common/level_children.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/model/fused_ops.h"
#include "framework/sampling.h"

namespace speclab {
namespace tree_builders {
namespace {

// What a level's pick reads besides its arguments: rank span, depth, the
// children offsets, OnDevice's flat, parent_rows, feed and feed_parents, then
// the warp of q (temperature, top_k, top_p), which only sampled picks read.
using Plan = std::tuple<int64_t, int64_t, std::vector<int64_t>, at::Tensor, at::Tensor, at::Tensor, at::Tensor,
                        double, int64_t, double>;

// Level `level`'s choice from the ranks of its fed rows (by_rank [rows,
// rank span]) and, when sampled, their q rows: its children, written into
// the draft's buffers (carry: the drafts [n - 1] and, sampled, the q row each
// was drawn from [n, vocab], row 0 the root's zeros), which the last level
// keeps; and the next level's fed nodes.
LevelPick::Choice ChildrenOf(const Plan& plan, int64_t level, const at::Tensor& by_rank, const at::Tensor& q,
                             const std::vector<at::Tensor>& carry) {
  const auto& [rank_span, depth, offsets, flat, parent_rows, feed, feed_parents, temperature, top_k, top_p] = plan;
  const int64_t begin = offsets[level], count = offsets[level + 1] - offsets[level];
  std::vector<at::Tensor> buffers = carry;
  if (level == 0) {
    buffers.push_back(at::empty({offsets.back()}, by_rank.options()));
    if (q.defined()) {
      buffers.push_back(at::empty({offsets.back() + 1, q.size(1)}, q.options()));
      buffers[1].narrow(0, 0, 1).zero_();  // the root was not drawn
    }
  }
  // Gathered straight into the draft's buffers, with the next level's fed
  // tokens (one launch on CUDA).
  const bool last = level + 1 >= depth;  // the last pick: nothing is fed
  LevelPick::Choice choice;
  choice.tokens = GatherLevelChildren({.by_rank = by_rank.reshape({-1}),
                                       .flat = flat.narrow(0, begin, count),
                                       .children = buffers[0].narrow(0, begin, count),
                                       .q = q,
                                       .parent_rows = parent_rows.narrow(0, begin, count),
                                       .q_rows = q.defined() ? buffers[1].narrow(0, 1 + begin, count) : at::Tensor(),
                                       .feed = last ? at::Tensor() : feed[level],
                                       .width = feed.size(1)});
  if (!last) {
    choice.parents = feed_parents[level];
    choice.carry = std::move(buffers);
  } else {
    choice.parents = choice.tokens;
    choice.kept = std::move(buffers);
  }
  return choice;
}

}  // namespace

ShapeLevels::ShapeLevels(const TreeShape& shape, bool sample_without_replacement)
    : sample_(sample_without_replacement), depth_(shape.max_depth()) {
  // Fed rows: each depth's nodes with children, in node order (depth by depth).
  std::vector<int64_t> row_of(shape.size(), -1);
  std::vector<std::vector<int64_t>> fed(depth_ + 1);
  for (int node = 0; node < shape.size(); ++node) {
    parents_.push_back(shape.parent(node));
    rank_span_ = std::max<int64_t>(rank_span_, shape.RankSpan(node));
    if (shape.children(node).empty()) continue;
    row_of[node] = static_cast<int64_t>(fed[shape.depth(node)].size());
    fed[shape.depth(node)].push_back(node);
  }
  for (int64_t d = 1; d < depth_; ++d) width_ = std::max<int64_t>(width_, static_cast<int64_t>(fed[d].size()));
  // Children, depth by depth (nodes 1.. in order), and each next level's fed ones among them.
  offsets_.assign(depth_ + 1, shape.size() - 1);
  for (int node = shape.size() - 1; node >= 1; --node) offsets_[shape.depth(node) - 1] = node - 1;
  for (int node = 1; node < shape.size(); ++node) {
    const int64_t parent_row = row_of[shape.parent(node)];
    parent_rows_.push_back(parent_row);
    flat_.push_back(parent_row * rank_span_ + shape.rank(node));
  }
  for (int64_t level = 0; level + 1 < depth_; ++level) {
    std::vector<int64_t> row;
    for (int64_t node : fed[level + 1]) row.push_back(node - 1 - offsets_[level]);
    row.resize(width_, row.front());  // padding: a fed node again
    for (int64_t local : row) {
      feed_.push_back(local);
      feed_parents_.push_back(parent_rows_[offsets_[level] + local]);
    }
  }
}

const ShapeLevels::OnDevice& ShapeLevels::On(c10::Device device) {
  if (on_device_ && on_device_->device == device) return *on_device_;
  const int64_t fed_levels = std::max<int64_t>(depth_ - 1, 1);
  OnDevice plan{.device = device,
                .flat = LongsToDevice(flat_, device),
                .parent_rows = LongsToDevice(parent_rows_, device),
                .feed = LongsToDevice(feed_.empty() ? std::vector<int64_t>(width_, 0) : feed_, device)
                            .view({fed_levels, width_}),
                .feed_parents = LongsToDevice(feed_.empty() ? std::vector<int64_t>(width_, 0) : feed_parents_, device)
                                    .view({fed_levels, width_}),
                .parents = LongsToDevice(parents_, device)};
  std::tie(plan.mask, plan.depths) = fused::TreeMask(plan.parents);
  on_device_ = std::move(plan);
  return *on_device_;
}

const LevelPick& ShapeLevels::PickFor(const OnDevice& on, const BuildRequest& request, bool sample) {
  const SamplingParams& warp = request.sampling;
  const PickInputs inputs{.device = on.device, .sample = sample, .temperature = warp.temperature,
                          .top_k = warp.top_k, .top_p = warp.top_p, .generator = request.generator};
  if (pick_ && pick_inputs_ == inputs) return *pick_;
  const Plan plan{rank_span_,       depth_,     offsets_,         on.flat,   on.parent_rows, on.feed, on.feed_parents,
                  warp.temperature, warp.top_k, warp.top_p};
  pick_inputs_ = inputs;
  pick_ = sample ? LevelPick::Sampled(
                       width_,
                       [](const Plan& p, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry,
                          const at::Tensor& noise) {
                         // The exponential race: the ranks in order are draws without
                         // replacement from q (warp and race in one launch where it can).
                         const at::Tensor q = at::empty(logits.sizes(), logits.options().dtype(at::kFloat));
                         const at::Tensor ranks = WarpAndRaceRanks(
                             logits, at::Tensor(),
                             {.temperature = std::get<7>(p), .top_k = std::get<8>(p), .top_p = std::get<9>(p)},
                             noise.narrow(0, 0, q.size(0)), q, std::get<0>(p));
                         return ChildrenOf(p, level, ranks, q, carry);
                       },
                       plan, request.generator)
                 : LevelPick::Of(
                       width_,
                       [](const Plan& p, int64_t level, const at::Tensor& logits,
                          const std::vector<at::Tensor>& carry) {
                         return ChildrenOf(p, level, BestTokens(logits, std::get<0>(p)).tokens, at::Tensor(), carry);
                       },
                       plan);
  return *pick_;
}

absl::StatusOr<std::optional<DraftTree>> ShapeLevels::Draft(Drafter& drafter, const BuildRequest& request,
                                                            const char* builder, const DeviceRoot* root) {
  if (depth_ < 2) return std::nullopt;
  DeviceDrafter* device_drafter = DeviceFormOf(drafter);
  if (device_drafter == nullptr) return std::nullopt;
  const bool sample = sample_ && !request.sampling.greedy();
  if (sample && request.generator == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(builder, ": sampling needs a drafting generator"));
  // The picks cannot fail politely inside the drafter's graph: check the ranks here.
  for (LanguageModel* model : drafter.models())
    RETURN_IF_ERROR(CheckWidth(builder, "the largest child rank + 1", rank_span_, model->config().vocab_size));
  const OnDevice& on = On(request.device);
  const LevelPick& pick = PickFor(on, request, sample);
  const int levels = static_cast<int>(depth_ - 1);
  absl::StatusOr<LevelsKept> kept =
      root != nullptr ? device_drafter->DraftLevelsAt(*root, levels, pick) : device_drafter->DraftLevels(levels, pick);
  if (kept.status().code() == absl::StatusCode::kUnimplemented) return std::nullopt;
  if (!kept.ok()) return kept.status();
  const at::Tensor root_token = root != nullptr ? root->last_two.narrow(0, 1, 1).to(request.device)
                                                : LongsToDevice({request.root_token}, request.device);
  const std::vector<at::Tensor>& drafted = kept->back();
  DraftTree draft;
  draft.tree = TokenTree(request.root_token);
  draft.tokens = at::cat({root_token, drafted[0]});
  if (sample) {
    draft.draft_probs = drafted[1];
    draft.sampling = DraftSampling::kWithoutReplacement;
  }
  draft.device_shape =
      DraftTree::DeviceShape{.parents = on.parents,
                             .depths = on.depths,
                             .mask = on.mask,
                             .depth_bound = depth_,
                             .branching_bound = rank_span_};
  return draft;
}

}  // namespace tree_builders
}  // namespace speclab
