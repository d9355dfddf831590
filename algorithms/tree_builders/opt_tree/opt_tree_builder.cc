// `opt_tree`: OPT-Tree's adaptive draft tree (docs/algorithms.md §2.8;
// Jikai0Wang/OPT-Tree opt_classic/tree.py::Tree).
//
//   tree_builder: {type: opt_tree, nodes: 60, threshold: 0.5, max_depth: 10}
//   tree_builder: {type: opt_tree, nodes: 60, latency_profile_file: results/acceptance.yaml}
//
// A node's weight is the product of the drafter's probabilities along its
// path, so the sum of a tree's weights, E, is its expected accepted length
// when each draft is accepted with the probability the drafter gave it. For
// N nodes the tree of largest E among those grown is the N heaviest nodes
// (weights fall along every path, so that set is a tree).
//
// Level 1 is the root's N most probable tokens. Level d + 1: one drafter
// forward over level d's N nodes; each proposes its N most probable children
// and the N heaviest of the N² join the pool. (A child outside its level's
// best N is lighter than N pool nodes, so no N-node tree could hold it.)
// After each level the builder decides whether to grow another:
//
//   threshold δ (OPT-Tree): continue while E_d − E_{d−1} > δ, where E_d is
//     the weight of the N heaviest nodes of levels 1..d; keep those N.
//   latency profile: the rate of the n heaviest nodes of levels 1..d is
//     (1 + E_{n,d}) / (d·t_draft + t_target(n + 1)) tokens per unit time (d
//     drafter forwards grew them). Continue while a level raises the best
//     rate over n in [0, N]; keep the best (n, d) found (n = 0: the root
//     alone, when no tree pays for its forwards).
//
// Both stop at max_depth levels (default: the length policy's
// MaxDraftLength() each step, an adaptive tree size). OPT-Tree's reference
// judges a level only after it has grown the next one, and drops that one;
// deciding on the levels grown so far keeps its trees and saves that forward.
//
// Tokens are chosen, not sampled: kDeterministic, verified by greedy or
// point_mass. Weights come from the drafter's unwarped log-probabilities
// (draft_ops.h), summed in double. With a drafter that grows levels on the
// device (DeviceDrafter::DraftLevels: ModelDrafter; one CUDA graph on CUDA)
// the threshold rule runs there (opt_tree_levels.h): the graph skips the
// levels past the stop, nothing is read back, and the engine runs it
// pipelined (on CUDA, or wherever the engine asks BuildAt). Otherwise, on
// the CPU step by step (where no read is saved and every level's forward
// would run), and under a latency profile (which prices the target by the
// nodes kept, where a device tree has a fixed size), one forward and one
// read per level, as the reference's; the tree is pruned and re-indexed
// (pruned_tree.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/common/pruned_tree.h"
#include "algorithms/tree_builders/opt_tree/opt_tree_levels.h"
#include "framework/core/latency_profile.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_tree_builder.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

using tree_builders::Candidate;

constexpr char kName[] = "opt_tree";
constexpr double kDefaultThreshold = 0.5;  // the reference's evaluation setting

struct OptTreeOptions {
  int nodes = 0;
  std::optional<int> max_depth;          // unset: the length policy's bound
  double threshold = kDefaultThreshold;  // used without a profile
  std::optional<LatencyProfile> profile;
};

// The weights of the heaviest `n` pool entries among the first `size`, heaviest first.
std::vector<double> HeaviestWeights(const std::vector<Candidate>& pool, size_t size, int n) {
  std::vector<double> weights;
  for (size_t c = 0; c < size; ++c) weights.push_back(std::exp(pool[c].score));
  const size_t kept = std::min<size_t>(n, weights.size());
  std::partial_sort(weights.begin(), weights.begin() + kept, weights.end(), std::greater<double>());
  weights.resize(kept);
  return weights;
}

class OptTreeBuilder final : public TreeBuilder, public DeviceTreeBuilder {
 public:
  explicit OptTreeBuilder(OptTreeOptions options) : o_(std::move(options)) {}

  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = true, .samples_tokens = false,
            .length_control = o_.max_depth ? LengthControl::kNone : LengthControl::kMaxLength};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    if (request.device.is_cuda()) {
      ASSIGN_OR_RETURN(std::optional<DraftTree> grown, GrowOnDevice(drafter, request));
      if (grown) return *std::move(grown);
    }
    return GrowOnHost(drafter, request);
  }

  // The same tree as Build's, from DeviceDrafter::DraftLevelsAt.
  absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request, const DeviceRoot& root) override {
    ASSIGN_OR_RETURN(std::optional<DraftTree> grown, GrowOnDevice(drafter, request, &root));
    if (!grown)
      return absl::UnimplementedError(
          "opt_tree grows on the device only by its threshold, at least two levels deep, with a drafter that grows "
          "levels there");
    return *std::move(grown);
  }

 private:
  int MaxDepth(const BuildRequest& request) const {
    return o_.max_depth ? *o_.max_depth : request.policy->MaxDraftLength();
  }

  // Every level on the device (opt_tree_levels.h), the tree kept there.
  // nullopt, having fed nothing, under a latency profile, at depth 1, or
  // where the drafter has no DraftLevels.
  absl::StatusOr<std::optional<DraftTree>> GrowOnDevice(Drafter& drafter, const BuildRequest& request,
                                                        const DeviceRoot* root = nullptr) {
    const int depth = MaxDepth(request);
    DeviceDrafter* device = DeviceFormOf(drafter);
    if (o_.profile || depth < 2 || device == nullptr) return std::nullopt;
    // The picks cannot fail politely inside the drafter's graph: check the width here.
    for (LanguageModel* model : drafter.models())
      RETURN_IF_ERROR(tree_builders::CheckWidth(kName, "nodes", o_.nodes, model->config().vocab_size));
    using Params = std::tuple<int64_t, int64_t, double>;  // nodes, depth, threshold
    const LevelPick pick = LevelPick::Of(
        o_.nodes,
        [](const Params& p, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) {
          const auto& [nodes, depth, threshold] = p;
          return opt_tree::GrowLevel({.nodes = nodes, .depth = depth, .threshold = threshold}, level, logits, carry);
        },
        Params{o_.nodes, depth, o_.threshold});
    return tree_builders::DraftLevelsKeptOnDevice(*device, request, root, depth - 1, pick, depth);
  }

  absl::StatusOr<DraftTree> GrowOnHost(Drafter& drafter, const BuildRequest& request) {
    const int n = o_.nodes;
    const int max_depth = MaxDepth(request);
    TokenTree scratch = tree_builders::ScratchTree(request.root_token, n);
    std::vector<Candidate> pool;  // the levels' nodes, level by level
    std::vector<int> frontier;    // the last level's pool indices (empty: the root)
    std::vector<int> fed{0};      // their scratch nodes
    Choice best;                  // the root alone: one target token per step
    if (o_.profile) best.rate = 1 / o_.profile->TargetMs(1);
    double previous_weight = 0;
    for (int depth = 1; depth <= max_depth; ++depth) {
      ASSIGN_OR_RETURN(at::Tensor logits, drafter.NextTokenLogits(scratch, fed));
      if (depth == 1) RETURN_IF_ERROR(tree_builders::CheckWidth(kName, "nodes", n, logits.size(-1)));
      const tree_builders::TopK top = tree_builders::MostProbable(logits, n);
      const std::vector<double> host = tree_builders::ReadToHost({top.tokens, top.scores});  // the level's one read
      const size_t scores_at = host.size() / 2;
      std::vector<Candidate> children;
      for (size_t row = 0; row < fed.size(); ++row) {
        const int parent = depth == 1 ? -1 : frontier[row];
        const double base = parent < 0 ? 0.0 : pool[parent].score;
        for (int j = 0; j < n; ++j) {
          const size_t at = row * n + j;
          children.push_back({.parent = parent, .token = static_cast<int32_t>(host[at]),
                              .score = base + host[scores_at + at]});
        }
      }
      std::vector<int> level = tree_builders::BestCandidates(children, n);
      std::sort(level.begin(), level.end());  // pool order follows the parents' order
      frontier.clear();
      for (int c : level) {
        frontier.push_back(static_cast<int>(pool.size()));
        pool.push_back(children[c]);
      }
      const std::vector<double> heaviest = HeaviestWeights(pool, pool.size(), n);
      bool grow_on = depth < max_depth;
      if (o_.profile) {
        const Choice here = BestRate(heaviest, depth);
        if (here.rate > best.rate) {
          best = here;
          best.pool_size = pool.size();
        } else {
          grow_on = false;  // this level's forward did not pay
        }
      } else {
        double weight = 0;
        for (double w : heaviest) weight += w;
        best = {.nodes = n, .pool_size = pool.size()};
        grow_on = grow_on && weight - previous_weight > o_.threshold;
        previous_weight = weight;
      }
      if (!grow_on) break;
      fed.clear();
      for (int c : frontier) {
        const int parent = pool[c].parent;
        pool[c].scratch_node = scratch.AddNode(parent < 0 ? 0 : pool[parent].scratch_node, pool[c].token);
        fed.push_back(pool[c].scratch_node);
      }
    }
    const std::vector<Candidate> grown(pool.begin(), pool.begin() + best.pool_size);
    return tree_builders::TreeFromCandidates(request.root_token, grown,
                                             tree_builders::BestCandidates(grown, best.nodes), request.device);
  }

  struct Choice {
    int nodes = 0;         // kept nodes, root excluded
    size_t pool_size = 0;  // the pool entries of the levels they come from
    double rate = 0;       // tokens per unit time, under the latency profile
  };

  // The best n in [1, N] for `depth` grown levels whose heaviest weights are
  // `heaviest` (heaviest first).
  Choice BestRate(const std::vector<double>& heaviest, int depth) const {
    const LatencyProfile& profile = *o_.profile;
    Choice best;
    double expected = 1;  // the extra token
    for (size_t i = 0; i < heaviest.size(); ++i) {
      expected += heaviest[i];
      const int nodes = static_cast<int>(i + 1);
      const double rate = expected / (depth * profile.draft_ms + profile.TargetMs(nodes + 1));
      if (rate > best.rate) best = {.nodes = nodes, .rate = rate};
    }
    return best;
  }

  OptTreeOptions o_;
};

absl::StatusOr<std::unique_ptr<TreeBuilder>> Create(Options& options) {
  OptTreeOptions o;
  ASSIGN_OR_RETURN(int64_t nodes, options.GetInt("nodes", 60));
  if (nodes < 1 || nodes > 1024) return options.Error("nodes", "expected a number of drafted nodes in [1, 1024]");
  o.nodes = static_cast<int>(nodes);
  if (options.Has("max_depth")) {
    ASSIGN_OR_RETURN(int64_t depth, options.GetIntIn("max_depth", std::nullopt, 1, 64));
    o.max_depth = static_cast<int>(depth);
  }
  const bool has_profile = options.Has("latency_profile") || options.Has("latency_profile_file");
  if (has_profile && options.Has("threshold"))
    return options.Error("threshold", "give either 'threshold' or a latency profile ('latency_profile' or "
                                      "'latency_profile_file'), not both: the profile decides when to stop");
  if (has_profile) {
    ASSIGN_OR_RETURN(o.profile, ReadLatencyProfile(options));
  } else {
    ASSIGN_OR_RETURN(o.threshold, options.GetDouble("threshold", kDefaultThreshold));
    if (!(o.threshold >= 0 && std::isfinite(o.threshold)))
      return options.Error("threshold", "expected a finite gain in expected accepted tokens, >= 0");
  }
  return std::unique_ptr<TreeBuilder>(std::make_unique<OptTreeBuilder>(std::move(o)));
}

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "OPT-Tree: the N nodes of largest expected acceptance, grown level by level while a level "
                   "adds more than a threshold (or pays under a latency profile); deterministic, verify with "
                   "point_mass/greedy (§2.8)",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
