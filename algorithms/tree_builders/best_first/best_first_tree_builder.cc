// `best_first`: SpecExec's budgeted tree, grown best-first by cumulative
// draft log-probability (docs/algorithms.md §2.7; yandex-research/specexec
// specdec/specexec.py::grow_tree, get_next_beams).
//
//   tree_builder: {type: best_first, budget: 16, max_beam_len: 8}
//
// Options: budget B (drafted nodes, root excluded), max_beam_len (growth
// iterations; default: the length policy's MaxDraftLength()), max_n_beams
// (32), max_branch_width (16), decay_factor (0.95), min_log_prob (−10).
//
// Each iteration feeds the (at most max_n_beams) unexpanded nodes with the
// best scores to the drafter in one forward (the root alone at first); each
// proposes its top max_branch_width children, scored parent + log(decay) +
// log q. Children scoring below min_log_prob are dropped (the reference's
// docstring limit; its SpecExecBase never passes it on), except the root's
// best child: a step always drafts a token. Growth stops when nothing is
// proposed, or when the tree already holds B nodes and the best new child
// does not beat the B-th best of them; otherwise the children among the B
// best of tree ∪ new are added (exactly B, as the reference's top-k; ties go
// to the earlier node, the tree's before the new). The tree is finally
// trimmed to its B best nodes; decay < 1 makes a child score strictly below
// its parent (and ties go to the earlier node), so the kept set is a tree.
//
// Tokens are chosen, not sampled: kDeterministic, verified by point_mass
// (one target sample per node, as SpecExec validates) or greedy. Scores are
// the drafter's unwarped log-probabilities. With a drafter that grows levels
// on the device (DeviceDrafter::DraftLevels: ModelDrafter; one CUDA graph on
// CUDA), each iteration is a level whose nodes may extend any earlier one
// (best_first_growth.h) and the tree is kept there, so the engine runs it
// pipelined (the graph skips the levels past growth's stop, on CUDA, or
// wherever the engine asks BuildAt); that tree always has B + 1 nodes, where
// fewer grew topped up with copies of the root's best child (never accepted:
// verifiers take the first child with the sampled token). Otherwise, and on
// the CPU step by step (where no read is saved and every level would run),
// one forward and one read of the top-k per iteration; the tree is pruned
// and re-indexed (pruned_tree.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <tuple>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/best_first/best_first_growth.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/common/pruned_tree.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_tree_builder.h"
#include "framework/model/fused_ops.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

using tree_builders::Candidate;

constexpr char kName[] = "best_first";

struct BestFirstOptions {
  int budget = 0;
  std::optional<int> max_beam_len;  // unset: the length policy's bound
  int max_n_beams = 32;
  int max_branch_width = 16;
  double decay_factor = 0.95;
  double min_log_prob = -10;
};

class BestFirstTreeBuilder final : public TreeBuilder, public DeviceTreeBuilder {
 public:
  explicit BestFirstTreeBuilder(BestFirstOptions options) : o_(options) {}

  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = true, .samples_tokens = false,
            .length_control = o_.max_beam_len ? LengthControl::kNone : LengthControl::kMaxLength};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    if (request.device.is_cuda()) {
      ASSIGN_OR_RETURN(std::optional<DraftTree> grown, GrowOnDevice(drafter, request));
      if (grown) return *std::move(grown);
    }
    return GrowOnHost(drafter, request);
  }

  // The same growth as Build's on the device (DeviceDrafter::DraftLevelsAt).
  absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request, const DeviceRoot& root) override {
    ASSIGN_OR_RETURN(std::optional<DraftTree> grown, GrowOnDevice(drafter, request, &root));
    if (!grown) return absl::UnimplementedError("the drafter has no device-rooted tree levels, or max_beam_len is 1");
    return *std::move(grown);
  }

 private:
  int Iterations(const BuildRequest& request) const {
    return o_.max_beam_len ? *o_.max_beam_len : request.policy->MaxDraftLength();
  }

  // Every iteration as a level of the drafter's DraftLevels (one CUDA graph
  // on CUDA), the tree kept there: best_first_growth.h. nullopt, having fed
  // nothing, where the drafter has no such path or a single iteration
  // leaves no level to feed.
  absl::StatusOr<std::optional<DraftTree>> GrowOnDevice(Drafter& drafter, const BuildRequest& request,
                                                        const DeviceRoot* root = nullptr) {
    const best_first::Rule rule{.budget = o_.budget,
                                .beams = std::min(o_.max_n_beams, o_.budget),
                                .iterations = Iterations(request),
                                .branch = o_.max_branch_width,
                                .log_decay = std::log(o_.decay_factor),
                                .min_log_prob = o_.min_log_prob};
    DeviceDrafter* device = DeviceFormOf(drafter);
    if (device == nullptr || rule.iterations < 2) return std::nullopt;
    using Params = std::tuple<int64_t, int64_t, int64_t, int64_t, double, double>;
    const LevelPick pick = LevelPick::Of(
        rule.beams,
        [](const Params& p, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) {
          const auto& [budget, beams, iterations, branch, log_decay, min_log_prob] = p;
          const best_first::Rule rule{budget, beams, iterations, branch, log_decay, min_log_prob};
          best_first::Growth growth =
              level == 0 ? best_first::StartGrowth(rule, logits.device()) : best_first::Growth::FromCarry(carry);
          const tree_builders::TopK top = tree_builders::MostProbable(logits, std::min(branch, logits.size(-1)));
          const best_first::Level grown = best_first::GrowLevel(rule, growth, top.tokens, top.scores, level);
          LevelPick::Choice choice;
          if (level + 1 < iterations)
            choice = {.tokens = grown.feed.tokens, .parents = grown.feed.parents, .depths = grown.feed.depths};
          auto [mask, depths] = fused::TreeMask(grown.kept.parents);
          choice.kept = {grown.kept.tokens, grown.kept.parents, depths, mask};  // the draft so far
          choice.go = at::logical_not(growth.stopped);  // the graph skips the levels past the stop
          choice.carry = growth.ToCarry();
          return choice;
        },
        Params{rule.budget, rule.beams, rule.iterations, rule.branch, rule.log_decay, rule.min_log_prob});
    return tree_builders::DraftLevelsKeptOnDevice(*device, request, root, static_cast<int>(rule.iterations - 1), pick,
                                                  rule.iterations);
  }

  absl::StatusOr<DraftTree> GrowOnHost(Drafter& drafter, const BuildRequest& request) {
    const int iterations = Iterations(request);
    const double log_decay = std::log(o_.decay_factor);
    TokenTree scratch = tree_builders::ScratchTree(request.root_token, o_.budget);
    std::vector<Candidate> tree;     // every node grown so far (root excluded)
    std::vector<char> expanded;
    for (int iteration = 0; iteration < iterations; ++iteration) {
      // Beams: the root first, later the best unexpanded nodes, fed in index order.
      std::vector<int> beams;  // candidate indices; -1 is the root
      if (iteration == 0) {
        beams.push_back(-1);
      } else {
        std::vector<Candidate> open;
        std::vector<int> open_index;
        for (size_t c = 0; c < tree.size(); ++c) {
          if (expanded[c]) continue;
          open.push_back(tree[c]);
          open_index.push_back(static_cast<int>(c));
        }
        for (int i : tree_builders::BestCandidates(open, o_.max_n_beams)) beams.push_back(open_index[i]);
        std::sort(beams.begin(), beams.end());
      }
      if (beams.empty()) break;
      std::vector<int> fed;
      for (int b : beams) {
        if (b < 0) {
          fed.push_back(0);
          continue;
        }
        const int parent = tree[b].parent;
        tree[b].scratch_node = scratch.AddNode(parent < 0 ? 0 : tree[parent].scratch_node, tree[b].token);
        fed.push_back(tree[b].scratch_node);
        expanded[b] = 1;
      }
      ASSIGN_OR_RETURN(at::Tensor logits, drafter.NextTokenLogits(scratch, fed));
      const int width = static_cast<int>(std::min<int64_t>(o_.max_branch_width, logits.size(-1)));
      tree_builders::TopK top = tree_builders::MostProbable(logits, width);
      const std::vector<double> host = tree_builders::ReadToHost({top.tokens, top.scores});  // one read
      const size_t scores_at = host.size() / 2;

      std::vector<Candidate> fresh;
      for (size_t row = 0; row < beams.size(); ++row) {
        const double base = beams[row] < 0 ? 0.0 : tree[beams[row]].score;
        for (int j = 0; j < width; ++j) {
          const size_t at = row * width + j;
          const double score = base + log_decay + host[scores_at + at];
          const bool roots_best = iteration == 0 && at == 0;
          if (!(score >= o_.min_log_prob) && !roots_best) continue;  // also drops -inf
          fresh.push_back({.parent = beams[row], .token = static_cast<int32_t>(host[at]), .score = score});
        }
      }
      if (fresh.empty()) break;
      double best_new = fresh.front().score;
      for (const Candidate& c : fresh) best_new = std::max(best_new, c.score);
      if (static_cast<int>(tree.size()) >= o_.budget &&
          best_new <= tree[tree_builders::BestCandidates(tree, o_.budget).back()].score)
        break;  // nothing new would make the top B
      // The children among the B best of tree ∪ fresh (ties: the earlier, the tree first).
      std::vector<Candidate> both = tree;
      both.insert(both.end(), fresh.begin(), fresh.end());
      std::vector<char> in_top(both.size(), 0);
      for (int i : tree_builders::BestCandidates(both, o_.budget)) in_top[i] = 1;
      for (size_t i = tree.size(); i < both.size(); ++i) {
        if (!in_top[i]) continue;
        tree.push_back(both[i]);
        expanded.push_back(0);
      }
    }
    return tree_builders::TreeFromCandidates(request.root_token, tree,
                                             tree_builders::BestCandidates(tree, o_.budget), request.device);
  }

  BestFirstOptions o_;
};

absl::StatusOr<std::unique_ptr<TreeBuilder>> Create(Options& options) {
  BestFirstOptions o;
  ASSIGN_OR_RETURN(int64_t budget, options.GetInt("budget"));
  if (budget < 1 || budget > 4096) return options.Error("budget", "expected a number of drafted nodes in [1, 4096]");
  o.budget = static_cast<int>(budget);
  if (options.Has("max_beam_len")) {
    ASSIGN_OR_RETURN(int64_t length, options.GetIntIn("max_beam_len", std::nullopt, 1, 256));
    o.max_beam_len = static_cast<int>(length);
  }
  ASSIGN_OR_RETURN(int64_t beams, options.GetIntIn("max_n_beams", o.max_n_beams, 1, 4096));
  o.max_n_beams = static_cast<int>(beams);
  ASSIGN_OR_RETURN(int64_t width, options.GetIntIn("max_branch_width", o.max_branch_width, 1, 1024));
  o.max_branch_width = static_cast<int>(width);
  ASSIGN_OR_RETURN(o.decay_factor, options.GetDouble("decay_factor", o.decay_factor));
  if (!(o.decay_factor > 0 && o.decay_factor <= 1)) return options.Error("decay_factor", "expected a number in (0, 1]");
  ASSIGN_OR_RETURN(o.min_log_prob, options.GetDouble("min_log_prob", o.min_log_prob));
  if (!(o.min_log_prob <= 0)) return options.Error("min_log_prob", "expected a log-probability <= 0");
  return std::unique_ptr<TreeBuilder>(std::make_unique<BestFirstTreeBuilder>(o));
}

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "SpecExec best-first budgeted tree by cumulative log q; deterministic, verify with "
                   "point_mass/greedy (§2.7)",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
