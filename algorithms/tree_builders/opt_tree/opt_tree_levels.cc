#include "algorithms/tree_builders/opt_tree/opt_tree_levels.h"

#include <ATen/ATen.h>

#include <limits>

#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/common/top_k_frontier.h"
#include "framework/device/kernel_launch.h"
#include "framework/model/fused_ops.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/tree_builders/opt_tree/cuda/opt_tree_kernels.h"
#endif

namespace speclab::opt_tree {
namespace {

constexpr double kNone = -std::numeric_limits<double>::infinity();

// The pool and the rule's state, carried between levels.
struct Growth {
  at::Tensor tokens;    // [depth * N] int64: level l's entries at l * N..
  at::Tensor parents;   // [depth * N] int64: the parent's entry, -1 under the root
  at::Tensor scores;    // [depth * N] float64: cumulative log q
  at::Tensor previous;  // [1] float64: E of the last level judged
  at::Tensor kept;      // [1] int64: the entries of the levels grown up to the stop
  at::Tensor go;        // [1] bool

  std::vector<at::Tensor> ToCarry() const { return {tokens, parents, scores, previous, kept, go}; }
  static Growth FromCarry(const std::vector<at::Tensor>& c) { return {c[0], c[1], c[2], c[3], c[4], c[5]}; }
};

Growth StartGrowth(const Rule& rule, c10::Device device) {
  const int64_t entries = rule.depth * rule.nodes;
  const auto longs = at::TensorOptions().device(device).dtype(at::kLong);
  return {.tokens = at::zeros({entries}, longs), .parents = at::full({entries}, -1, longs),
          .scores = at::full({entries}, kNone, longs.dtype(at::kDouble)),
          .previous = at::zeros({1}, longs.dtype(at::kDouble)), .kept = at::zeros({1}, longs),
          .go = at::ones({1}, longs.dtype(at::kBool))};
}

struct Level {
  at::Tensor feed_tokens;   // [N]: the next feed (not last)
  at::Tensor feed_rows;     // [N]: the frontier row each fed node extends (not last)
  at::Tensor kept_tokens;   // [N]: the tree kept so far
  at::Tensor kept_parents;  // [N + 1]
};

// The reference (ATen) form of the level kernel.
Level GrowLevelWithAten(const Rule& rule, Growth& growth, const tree_builders::TopK& top, int64_t level) {
  const int64_t n = rule.nodes;
  const bool last = level + 1 == rule.depth;
  // The level's N best children (ties: the earlier), in child order.
  at::Tensor scores = top.scores.to(at::kDouble);
  if (level > 0) scores = scores + growth.scores.narrow(0, (level - 1) * n, n).unsqueeze(1);
  scores = scores.reshape({-1});
  const at::Tensor chosen = tree_builders::BestInOrder(scores, n);
  const at::Tensor tokens = top.tokens.reshape({-1}).index_select(0, chosen);
  const at::Tensor rows = at::div(chosen, n, "floor");
  growth.tokens.narrow(0, level * n, n).copy_(tokens);
  growth.parents.narrow(0, level * n, n).copy_(level == 0 ? at::full_like(rows, -1) : rows + (level - 1) * n);
  growth.scores.narrow(0, level * n, n).copy_(scores.index_select(0, chosen));

  // The rule, where growth went on.
  const int64_t size = (level + 1) * n;
  const at::Tensor heaviest = std::get<0>(growth.scores.narrow(0, 0, size).topk(n));
  const at::Tensor weight = heaviest.exp().cumsum(0).narrow(0, n - 1, 1);  // heaviest first
  const at::Tensor was_going = growth.go;
  growth.go = at::logical_and(was_going, (weight - growth.previous) > rule.threshold);
  if (last) growth.go = at::zeros_like(was_going);
  growth.kept = at::where(was_going, at::full_like(growth.kept, size), growth.kept);
  growth.previous = at::where(was_going, weight, growth.previous);

  const at::Tensor index = at::arange(growth.scores.size(0), growth.kept.options());
  const std::vector<at::Tensor> kept = tree_builders::KeptInOrder(
      growth.tokens, growth.parents, at::where(index < growth.kept, growth.scores, kNone), n);
  Level out{.kept_tokens = kept[0], .kept_parents = kept[1]};
  if (!last) {
    out.feed_tokens = tokens;
    out.feed_rows = rows;
  }
  return out;
}

Level GrowLevelOnDevice(const Rule& rule, Growth& growth, const tree_builders::TopK& top, int64_t level) {
#ifdef SPECLAB_WITH_CUDA
  const int64_t n = rule.nodes;
  const at::Tensor tokens = top.tokens.contiguous(), logq = top.scores.contiguous();
  if (kernel_launch::Enabled() && tokens.is_cuda() && logq.scalar_type() == at::kFloat &&
      tokens.scalar_type() == at::kLong && n * n <= opt_tree_kernels::kMaxItems &&
      rule.depth * n <= opt_tree_kernels::kMaxItems) {
    const c10::cuda::CUDAGuard guard(tokens.device());
    const bool last = level + 1 == rule.depth;
    const auto longs = growth.kept.options();
    Level out{.kept_tokens = at::empty({n}, longs), .kept_parents = at::empty({n + 1}, longs)};
    if (!last) {
      out.feed_tokens = at::empty({n}, longs);
      out.feed_rows = at::empty({n}, longs);
    }
    const opt_tree_kernels::Pool pool{.tokens = growth.tokens.data_ptr<int64_t>(),
                                      .parents = growth.parents.data_ptr<int64_t>(),
                                      .scores = growth.scores.data_ptr<double>(),
                                      .previous = growth.previous.data_ptr<double>(),
                                      .kept = growth.kept.data_ptr<int64_t>(),
                                      .go = growth.go.data_ptr<bool>()};
    const opt_tree_kernels::LevelRule level_rule{.nodes = static_cast<int>(n), .depth = static_cast<int>(rule.depth),
                                                 .level = static_cast<int>(level), .threshold = rule.threshold};
    kernel_launch::Check(
        opt_tree_kernels::LaunchGrowLevel(tokens.data_ptr<int64_t>(), logq.data_ptr<float>(),
                                          static_cast<int>(tokens.size(0)), pool, level_rule,
                                          last ? nullptr : out.feed_tokens.data_ptr<int64_t>(),
                                          last ? nullptr : out.feed_rows.data_ptr<int64_t>(),
                                          out.kept_tokens.data_ptr<int64_t>(), out.kept_parents.data_ptr<int64_t>(),
                                          kernel_launch::Stream(tokens)),
        "opt_tree::GrowLevel");
    return out;
  }
#endif
  return GrowLevelWithAten(rule, growth, top, level);
}

}  // namespace

LevelPick::Choice GrowLevel(const Rule& rule, int64_t level, const at::Tensor& logits,
                            const std::vector<at::Tensor>& carry) {
  Growth growth = level == 0 ? StartGrowth(rule, logits.device()) : Growth::FromCarry(carry);
  const Level grown = GrowLevelOnDevice(rule, growth, tree_builders::MostProbable(logits, rule.nodes), level);
  auto [mask, depths] = fused::TreeMask(grown.kept_parents);
  return {.tokens = grown.feed_tokens, .parents = grown.feed_rows, .carry = growth.ToCarry(),
          .kept = {grown.kept_tokens, grown.kept_parents, depths, mask}, .go = growth.go};
}

}  // namespace speclab::opt_tree
