// `dynamic_topk`: EAGLE-2's context-dependent draft tree (shared/ALGORITHMS.md
// §2.4; SafeAILab/EAGLE cnets.py::topK_genrate).
//
//   tree_builder: {type: dynamic_topk, top_k: 10, depth: 5, total_tokens: 60}
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
// depth + 1 drafter forwards, one device-to-host read of the K-by-K top-k
// per forward (the frontier's parents decide the next forward's mask). The
// returned tree is pruned, so it is re-indexed (pruned_tree.h).
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/common/pruned_tree.h"
#include "framework/core/status_macros.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

using tree_builders::Candidate;

constexpr char kName[] = "dynamic_topk";

class DynamicTopKTreeBuilder final : public TreeBuilder {
 public:
  DynamicTopKTreeBuilder(int top_k, int depth, int total_tokens)
      : top_k_(top_k), depth_(depth), total_tokens_(total_tokens) {}

  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = true, .samples_tokens = false};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    const int k = top_k_;
    TokenTree scratch = tree_builders::ScratchTree(request.root_token, total_tokens_ - 1);
    std::vector<Candidate> pool;
    std::vector<int> frontier;  // pool indices
    std::vector<int> fed{0};    // scratch nodes of the next forward (the root first)
    for (int level = 0; level <= depth_; ++level) {
      ASSIGN_OR_RETURN(at::Tensor logits, drafter.NextTokenLogits(scratch, fed));
      RETURN_IF_ERROR(tree_builders::CheckWidth(kName, "top_k", k, logits.size(-1)));
      tree_builders::TopK top = tree_builders::BestTokens(tree_builders::LogProbabilities(logits), k);
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
      if (level == depth_) break;  // EAGLE-2 picks one more frontier but never feeds it
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

 private:
  int top_k_, depth_, total_tokens_;
};

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "EAGLE-2 dynamic tree: top-k expansion by cumulative log q, rerank to total_tokens; "
                   "deterministic, verify with greedy/point_mass (§2.4)",
    .lossless = "-",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<TreeBuilder>> {
      ASSIGN_OR_RETURN(int64_t top_k, options.GetInt("top_k", 10));
      ASSIGN_OR_RETURN(int64_t depth, options.GetInt("depth", 5));
      ASSIGN_OR_RETURN(int64_t total_tokens, options.GetInt("total_tokens", 60));
      if (top_k < 1 || top_k > 256) return options.Error("top_k", "expected an integer in [1, 256]");
      if (depth < 1 || depth > 64) return options.Error("depth", "expected an integer in [1, 64]");
      const int64_t pool = top_k + depth * top_k * top_k;
      if (total_tokens < 2 || total_tokens - 1 > pool)
        return options.Error("total_tokens",
                             absl::StrCat("expected a tree size in [2, ", pool + 1,
                                          "] (root included; the pool holds top_k + depth * top_k^2 = ", pool,
                                          " drafts)"));
      return std::unique_ptr<TreeBuilder>(std::make_unique<DynamicTopKTreeBuilder>(
          static_cast<int>(top_k), static_cast<int>(depth), static_cast<int>(total_tokens)));
    },
});

}  // namespace
}  // namespace speclab
