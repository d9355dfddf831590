// `dynamic_topk`: EAGLE-2's context-dependent draft tree (docs/algorithms.md
// §2.4; SafeAILab/EAGLE cnets.py::topK_genrate).
//
//   tree_builder: {type: dynamic_topk, top_k: 10, depth: 5, total_tokens: 60}
//
// Without `depth`, each step grows the length policy's MaxDraftLength()
// levels (an adaptive tree size), raised where needed so that the pool holds
// total_tokens - 1 drafts.
//
// The root proposes its top-K tokens by log q: they form the first frontier
// and enter the pool with score log q. Then `depth` times: one drafter
// forward over the K frontier nodes; each proposes its top-K children,
// scored by cumulative log q; all K² enter the pool and the K best become
// the next frontier. Finally the total_tokens − 1 best pool nodes (of
// K + depth·K²) are kept in pool order. Scores never increase along a path
// and ties go to the earlier pool node, so a kept node's parent is kept.
//
// Tokens are chosen, not sampled: the draft is deterministic (q is a point
// mass), so verify with greedy or point_mass (EAGLE-2 sets q(x) = 1, §2.4).
// Scores are the drafter's unwarped log-probabilities (draft_ops.h). Cost:
// depth + 1 drafter forwards. With a drafter that grows levels on the device
// (DeviceDrafter::DraftLevels: ModelDrafter; one CUDA graph on CUDA), each frontier
// is chosen there and the pool is read back once; otherwise once per forward
// (the frontier's parents decide the next forward's mask, built on the host).
// The returned tree is pruned, so it is re-indexed (pruned_tree.h).
#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/common/pruned_tree.h"
#include "algorithms/tree_builders/common/top_k_frontier.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_tree_builder.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

using tree_builders::Candidate;

constexpr char kName[] = "dynamic_topk";

class DynamicTopKTreeBuilder final : public TreeBuilder, public DeviceTreeBuilder {
 public:
  DynamicTopKTreeBuilder(int top_k, std::optional<int> depth, int total_tokens)
      : top_k_(top_k), depth_(depth), total_tokens_(total_tokens) {}

  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = true, .samples_tokens = false,
            .length_control = depth_ ? LengthControl::kNone : LengthControl::kMaxLength};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    ASSIGN_OR_RETURN(std::optional<DraftTree> grown, GrowOnDevice(drafter, request));
    if (grown) return *std::move(grown);
    TokenTree scratch = tree_builders::ScratchTree(request.root_token, total_tokens_ - 1);
    ASSIGN_OR_RETURN(at::Tensor logits, drafter.NextTokenLogits(scratch, {0}));
    RETURN_IF_ERROR(tree_builders::CheckWidth(kName, "top_k", top_k_, logits.size(-1)));
    return GrowOnHost(drafter, request, scratch, tree_builders::MostProbable(logits, top_k_));
  }

  // The same tree as GrowOnDevice's, from DeviceDrafter::DraftLevelsAt.
  absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request, const DeviceRoot& root) override {
    ASSIGN_OR_RETURN(std::optional<DraftTree> grown, GrowOnDevice(drafter, request, &root));
    if (!grown) return absl::UnimplementedError("the drafter has no device-rooted tree levels");
    return *std::move(grown);
  }

 private:
  // Every level on the device (DeviceDrafter::DraftLevels; ModelDrafter on CUDA:
  // one graph), and the tree kept from the pool inside that graph too: the
  // engine queues the target's forward without reading the draft back
  // (DraftTree::DeviceShape). The same pool, in the same order, as
  // GrowOnHost: scores are added in double from the same float32
  // log-probabilities, and tree_builders::BestInOrder breaks ties toward the earlier node
  // as BestCandidates does. nullopt, having fed nothing, where the drafter
  // has no DraftLevels (DraftLevelsAt where `root` is given: the pipelined
  // engine's step, its root token on the device).
  absl::StatusOr<std::optional<DraftTree>> GrowOnDevice(Drafter& drafter, const BuildRequest& request,
                                                        const DeviceRoot* root = nullptr) {
    const int64_t k = top_k_, depth = Depth(request), kept = total_tokens_ - 1;
    // Carry: the frontier (scores, pool indices) and the pool (tokens,
    // parents' pool indices, scores), allocated at level 0 and filled level by
    // level in place (tree_builders::ExpandFrontier); the root's top K are level 1.
    using Params = std::tuple<int64_t, int64_t, int64_t>;  // top_k, depth, kept
    const LevelPick pick = LevelPick::Of(
        k, [](const Params& p, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) {
          const auto& [k, depth, kept] = p;
          const tree_builders::TopK top = tree_builders::MostProbable(logits, k);
          if (level == 0) {
            const at::Tensor tokens = top.tokens.reshape({-1});
            const at::Tensor scores = top.scores.reshape({-1}).to(at::kDouble);  // 0 + log q, as on the host
            const int64_t pool = k + depth * k * k;
            const auto longs = tokens.options();
            const at::Tensor pool_tokens = at::empty({pool}, longs), pool_parents = at::empty({pool}, longs),
                             pool_scores = at::empty({pool}, scores.options());
            pool_tokens.narrow(0, 0, k).copy_(tokens);
            pool_parents.narrow(0, 0, k).fill_(-1);
            pool_scores.narrow(0, 0, k).copy_(scores);
            return LevelPick::Choice{.tokens = tokens, .parents = at::zeros({k}, longs),
                                     .carry = {scores, at::arange(k, longs), pool_tokens, pool_parents, pool_scores}};
          }
          // The K best children of the level (ties: the earlier), fed in pool order.
          const tree_builders::Frontier next = tree_builders::ExpandFrontier(
              top.scores, top.tokens, carry[0], carry[1], carry[2], carry[3], carry[4], k + (level - 1) * k * k);
          LevelPick::Choice choice{.tokens = next.tokens, .parents = next.rows,
                                   .carry = {next.scores, next.pool, carry[2], carry[3], carry[4]}};
          if (level == depth) choice.kept = tree_builders::KeptInOrder(carry[2], carry[3], carry[4], kept);
          return choice;
        },
        Params{k, depth, kept});
    // The picks cannot fail politely inside the drafter's graph: check top_k here.
    for (LanguageModel* model : drafter.models())
      RETURN_IF_ERROR(tree_builders::CheckWidth(kName, "top_k", k, model->config().vocab_size));
    DeviceDrafter* device = DeviceFormOf(drafter);
    if (device == nullptr) return std::nullopt;
    return tree_builders::DraftLevelsKeptOnDevice(*device, request, root, static_cast<int>(depth), pick, depth + 1);
  }

  // Level by level with one read per level: the frontier's parents decide
  // the next forward's mask, which the drafter builds from the host tree.
  absl::StatusOr<DraftTree> GrowOnHost(Drafter& drafter, const BuildRequest& request, TokenTree& scratch,
                                       const tree_builders::TopK& root_top) {
    const int k = top_k_, depth = Depth(request);
    std::vector<Candidate> pool;
    std::vector<int> frontier;  // pool indices
    std::vector<int> fed{0};    // scratch nodes of the next forward (the root first)
    for (int level = 0; level <= depth; ++level) {
      tree_builders::TopK top = root_top;
      if (level > 0) {
        ASSIGN_OR_RETURN(at::Tensor logits, drafter.NextTokenLogits(scratch, fed));
        top = tree_builders::MostProbable(logits, k);
      }
      const std::vector<double> host = tree_builders::ReadToHost({top.tokens, top.scores});  // the level's one read
      const size_t scores_at = host.size() / 2;
      std::vector<int> children;
      for (size_t row = 0; row < fed.size(); ++row) {
        const int parent = level == 0 ? -1 : frontier[row];
        const double base = parent < 0 ? 0.0 : pool[parent].score;
        for (int j = 0; j < k; ++j) {
          const size_t at = row * k + j;
          children.push_back(static_cast<int>(pool.size()));
          pool.push_back({.parent = parent, .token = static_cast<int32_t>(host[at]),
                          .score = base + host[scores_at + at]});
        }
      }
      if (level == depth) break;  // EAGLE-2 picks one more frontier but never feeds it
      // Next frontier: the K best of this level's new nodes (all K at level 1).
      std::vector<Candidate> level_nodes;
      for (int c : children) level_nodes.push_back(pool[c]);
      frontier.clear();
      fed.clear();
      for (int i : tree_builders::BestCandidates(level_nodes, k)) frontier.push_back(children[i]);
      std::sort(frontier.begin(), frontier.end());
      for (int c : frontier) {
        const int parent = pool[c].parent;
        pool[c].scratch_node = scratch.AddNode(parent < 0 ? 0 : pool[parent].scratch_node, pool[c].token);
        fed.push_back(pool[c].scratch_node);
      }
    }
    return tree_builders::TreeFromCandidates(request.root_token, pool,
                                             tree_builders::BestCandidates(pool, total_tokens_ - 1),
                                             request.device);
  }

  // The levels this step grows: `depth`, else the policy's length, at least
  // the least depth whose pool (top_k + depth top_k^2) holds total_tokens - 1.
  int Depth(const BuildRequest& request) const {
    if (depth_) return *depth_;
    const int64_t k = top_k_, kept = total_tokens_ - 1;
    const int needed = static_cast<int>(std::max<int64_t>(1, (kept - k + k * k - 1) / (k * k)));
    return std::max(request.policy->MaxDraftLength(), needed);
  }

  int top_k_;
  std::optional<int> depth_;  // unset: the length policy's
  int total_tokens_;
};

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "EAGLE-2 dynamic tree: top-k expansion by cumulative log q, rerank to total_tokens; "
                   "deterministic, verify with greedy/point_mass (§2.4)",
    .lossless = "-",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<TreeBuilder>> {
      ASSIGN_OR_RETURN(int64_t top_k, options.GetInt("top_k", 10));
      ASSIGN_OR_RETURN(int64_t total_tokens, options.GetInt("total_tokens", 60));
      if (top_k < 1 || top_k > 256) return options.Error("top_k", "expected an integer in [1, 256]");
      std::optional<int> depth;
      if (options.Has("depth")) {
        ASSIGN_OR_RETURN(int64_t levels, options.GetIntIn("depth", std::nullopt, 1, 64));
        depth = static_cast<int>(levels);
      }
      // Without depth the pool grows with the policy's length: bound the tree by 64 levels' pool.
      const int64_t pool = top_k + (depth ? *depth : 64) * top_k * top_k;
      if (total_tokens < 2 || total_tokens - 1 > pool)
        return options.Error("total_tokens",
                             absl::StrCat("expected a tree size in [2, ", pool + 1,
                                          "] (root included; the pool holds top_k + depth * top_k^2 = ", pool,
                                          " drafts)"));
      return std::unique_ptr<TreeBuilder>(
          std::make_unique<DynamicTopKTreeBuilder>(static_cast<int>(top_k), depth, static_cast<int>(total_tokens)));
    },
});

}  // namespace
}  // namespace speclab
