#include "algorithms/tree_builders/best_first/best_first_growth.h"

#include <ATen/ATen.h>

#include <limits>

#include "framework/device/kernel_launch.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/tree_builders/best_first/cuda/growth_kernels.h"
#endif

namespace speclab::best_first {
namespace {

constexpr double kNone = -std::numeric_limits<double>::infinity();

// The rank of each score in a stable descending sort: ties go to the smaller index.
at::Tensor Ranks(const at::Tensor& scores) {
  const at::Tensor order = std::get<1>(at::sort(scores, /*stable=*/true, /*dim=*/0, /*descending=*/true));
  return at::empty_like(order).index_copy_(0, order, at::arange(order.size(0), order.options()));
}

// The entries grown so far, [P + 1] bool (never the sink).
at::Tensor Grown(const Growth& growth) { return at::arange(growth.tokens.size(0), growth.count.options()) < growth.count; }

}  // namespace

std::vector<at::Tensor> Growth::ToCarry() const { return {tokens, parents, scores, depths, fed, count, stopped, beams}; }

Growth Growth::FromCarry(const std::vector<at::Tensor>& carry) {
  return {.tokens = carry[0], .parents = carry[1], .scores = carry[2], .depths = carry[3], .fed = carry[4],
          .count = carry[5], .stopped = carry[6], .beams = carry[7]};
}

Growth StartGrowth(const Rule& rule, c10::Device device) {
  const int64_t slots = rule.iterations * rule.budget + 1;
  const auto longs = at::TensorOptions().device(device).dtype(at::kLong);
  return {.tokens = at::zeros({slots}, longs), .parents = at::full({slots}, -1, longs),
          .scores = at::full({slots}, kNone, longs.dtype(at::kDouble)), .depths = at::ones({slots}, longs),
          .fed = at::full({slots}, -1, longs), .count = at::zeros({1}, longs),
          .stopped = at::zeros({1}, longs.dtype(at::kBool)), .beams = at::full({rule.beams}, -1, longs)};
}

void Grow(const Rule& rule, Growth& growth, const at::Tensor& top_tokens, const at::Tensor& top_logq, bool root) {
  const int64_t width = top_tokens.size(1), sink = growth.tokens.size(0) - 1;
  const auto longs = growth.count.options();
  // Each row's parent entry (-1: the root; a dummy row's is -1 too, and its score -inf).
  const at::Tensor parent = root ? at::full({1}, -1, longs) : growth.beams;
  const at::Tensor real_row = root ? at::ones({1}, growth.stopped.options()) : parent >= 0;
  const at::Tensor safe = parent.clamp_min(0);
  const at::Tensor base = root ? at::zeros({1}, growth.scores.options())
                               : at::where(real_row, growth.scores.index_select(0, safe), kNone);
  const at::Tensor scores = (base.unsqueeze(1) + rule.log_decay + top_logq.to(at::kDouble)).reshape({-1});
  at::Tensor passes = at::logical_and(scores >= rule.min_log_prob, real_row.repeat_interleave(width));
  if (root) passes.index_fill_(0, at::zeros({1}, longs), true);  // the root's best child always
  passes = at::logical_and(passes, at::logical_not(growth.stopped));
  const at::Tensor fresh = at::where(passes, scores, kNone);

  // The host loop's stop: nothing passed, or a full pool that no child beats.
  const at::Tensor grown = Grown(growth);
  const at::Tensor pool = at::where(grown, growth.scores, kNone).narrow(0, 0, sink);
  const at::Tensor kth_best = std::get<0>(at::sort(pool, /*stable=*/true, /*dim=*/0, /*descending=*/true))
                                  .narrow(0, rule.budget - 1, 1);
  const at::Tensor no_gain = at::logical_and(growth.count >= rule.budget, fresh.max().reshape({1}) <= kth_best);
  growth.stopped = at::logical_or(growth.stopped, at::logical_or(at::logical_not(passes.any()).reshape({1}), no_gain));

  // The children among the B best of pool ∪ children, appended in row order.
  const at::Tensor keep = at::logical_and(
      at::logical_and(passes, Ranks(at::cat({pool, fresh})).narrow(0, sink, fresh.size(0)) < rule.budget),
      at::logical_not(growth.stopped));
  const at::Tensor to = at::where(keep, growth.count + at::cumsum(keep, 0) - 1, sink);
  const at::Tensor parent_depth = root ? at::zeros({1}, longs) : growth.depths.index_select(0, safe);
  growth.tokens.index_copy_(0, to, top_tokens.reshape({-1}).to(at::kLong));
  growth.parents.index_copy_(0, to, parent.repeat_interleave(width));
  growth.scores.index_copy_(0, to, scores);
  growth.depths.index_copy_(0, to, (parent_depth + 1).repeat_interleave(width));
  growth.count = growth.count + keep.sum().reshape({1});
}

Feed ChooseBeams(const Rule& rule, Growth& growth, int64_t level) {
  const int64_t sink = growth.tokens.size(0) - 1, w = rule.beams;
  const auto longs = growth.count.options();
  const at::Tensor open = at::logical_and(at::logical_and(Grown(growth), growth.fed < 0),
                                          at::logical_not(growth.stopped));
  const at::Tensor best =
      std::get<1>(at::sort(at::where(open, growth.scores, kNone), /*stable=*/true, /*dim=*/0, /*descending=*/true))
          .narrow(0, 0, w);
  // In entry order, the dummies (past the open entries) last.
  const at::Tensor picked = open.index_select(0, best);
  const at::Tensor beams = std::get<0>(at::sort(at::where(picked, best, sink + 1)));
  const at::Tensor real = beams <= sink;
  growth.beams = at::where(real, beams, -1);
  const at::Tensor safe = at::where(real, beams, 0);
  growth.fed.index_copy_(0, at::where(real, beams, sink), 1 + level * w + at::arange(w, longs));
  const at::Tensor parent = growth.parents.index_select(0, safe);
  const at::Tensor parent_node = at::where(parent >= 0, growth.fed.index_select(0, parent.clamp_min(0)), 0);
  return {.tokens = growth.tokens.index_select(0, safe), .parents = at::where(real, parent_node, 0),
          .depths = at::where(real, growth.depths.index_select(0, safe), 1)};
}

Kept KeepBest(const Rule& rule, const Growth& growth) {
  const int64_t sink = growth.tokens.size(0) - 1, b = rule.budget;
  const auto longs = growth.count.options();
  const at::Tensor pool = at::where(Grown(growth), growth.scores, kNone).narrow(0, 0, sink);
  const at::Tensor best =
      std::get<1>(at::sort(pool, /*stable=*/true, /*dim=*/0, /*descending=*/true)).narrow(0, 0, b);
  // Grown entries sort first; past count the rest are padding (entry 0's copies).
  const at::Tensor real = at::arange(b, longs) < growth.count;
  const at::Tensor entries = std::get<0>(at::sort(at::where(real, best, sink)));
  const at::Tensor safe = at::where(real, entries, 0);
  // node_of[entry + 1]: the tree node of a kept entry (0: the root, entry -1).
  const at::Tensor node_of = at::zeros({sink + 2}, longs).index_copy_(0, at::where(real, entries + 1, sink + 1),
                                                                     at::arange(1, b + 1, longs));
  const at::Tensor parents = at::where(real, node_of.index_select(0, growth.parents.index_select(0, safe) + 1), 0);
  return {.tokens = growth.tokens.index_select(0, safe), .parents = at::cat({at::full({1}, -1, longs), parents})};
}

Level GrowLevel(const Rule& rule, Growth& growth, const at::Tensor& top_tokens, const at::Tensor& top_logq,
                int64_t level) {
  const bool root = level == 0, last = level + 1 == rule.iterations;
#ifdef SPECLAB_WITH_CUDA
  const int64_t pool = growth.tokens.size(0) - 1;
  if (kernel_launch::Enabled() && top_tokens.is_cuda() && top_logq.scalar_type() == at::kFloat &&
      top_tokens.scalar_type() == at::kLong && pool + top_tokens.numel() <= growth_kernels::kMaxItems) {
    const c10::cuda::CUDAGuard guard(top_tokens.device());
    const at::Tensor children = top_tokens.contiguous(), logq = top_logq.contiguous();
    const auto longs = growth.count.options();
    Level out{.kept = {.tokens = at::empty({rule.budget}, longs), .parents = at::empty({rule.budget + 1}, longs)}};
    if (!last) {
      out.feed = {.tokens = at::empty({rule.beams}, longs), .parents = at::empty({rule.beams}, longs),
                  .depths = at::empty({rule.beams}, longs)};
    }
    const growth_kernels::Pool state{.tokens = growth.tokens.data_ptr<int64_t>(),
                                     .parents = growth.parents.data_ptr<int64_t>(),
                                     .scores = growth.scores.data_ptr<double>(),
                                     .depths = growth.depths.data_ptr<int64_t>(),
                                     .fed = growth.fed.data_ptr<int64_t>(),
                                     .count = growth.count.data_ptr<int64_t>(),
                                     .stopped = growth.stopped.data_ptr<bool>(),
                                     .beams = growth.beams.data_ptr<int64_t>(),
                                     .pool = static_cast<int>(pool)};
    const growth_kernels::LevelRule level_rule{.budget = static_cast<int>(rule.budget),
                                               .beams = static_cast<int>(rule.beams),
                                               .level = static_cast<int>(level),
                                               .root = root,
                                               .last = last,
                                               .log_decay = rule.log_decay,
                                               .min_log_prob = rule.min_log_prob};
    kernel_launch::Check(growth_kernels::LaunchGrowLevel(
                             children.data_ptr<int64_t>(), logq.data_ptr<float>(), static_cast<int>(children.size(0)),
                             static_cast<int>(children.size(1)), state, level_rule,
                             last ? nullptr : out.feed.tokens.data_ptr<int64_t>(),
                             last ? nullptr : out.feed.parents.data_ptr<int64_t>(),
                             last ? nullptr : out.feed.depths.data_ptr<int64_t>(), out.kept.tokens.data_ptr<int64_t>(),
                             out.kept.parents.data_ptr<int64_t>(), kernel_launch::Stream(top_tokens)),
                         "best_first::GrowLevel");
    return out;
  }
#endif
  Grow(rule, growth, top_tokens, top_logq, root);
  Level out;
  if (!last) out.feed = ChooseBeams(rule, growth, level);
  out.kept = KeepBest(rule, growth);
  return out;
}

}  // namespace speclab::best_first
