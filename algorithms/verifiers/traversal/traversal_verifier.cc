// Traversal verification (Weng et al., NeurIPS 2025; §1.10 reconstruction).
//
// A leaf-to-root verification with sequence-level weights that keeps
// subsequences a top-down rule would discard. Every node u carries a row P_u
// (its target row, later a residual), the rejected tokens tried_u and a
// weight α_u (α_root = 1); for a child c,
//   α_c = min(1, α_u P_u(c) / Q~_u(c)),
// where Q~_u is u's shared draft row, masked by tried_u and renormalised when
// siblings were drawn without replacement. Then repeatedly: take the first
// leaf v in DFS order; if v is the root, emit nothing and draw y ~ P_root;
// with probability α_v accept root→v and draw y ~ P_v; otherwise, with u =
// parent(v) and r = (α_u P_u - Q~_u)+ (Q~_u as used for v), set
// α_u <- Σr / (Σr + 1 - α_u) (1 when that is 0/0), P_u <- norm(r), add v's
// token to tried_u, delete v and recompute α over u's remaining subtree.
// Reduces to block verification on chains and to §1.5/§1.6 at depth 1.
#include <memory>
#include <vector>

#include "algorithms/verifiers/common/distribution.h"
#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "traversal";

// Mutable per-step state of the traversal over one tree.
class TraversalState {
 public:
  TraversalState(const VerificationProblem& problem, std::vector<absl::Span<const double>> shared_q)
      : problem_(problem),
        tree_(*problem.tree),
        shared_q_(std::move(shared_q)),
        rows_(tree_.size()),
        tried_(tree_.size()),
        alpha_(tree_.size(), 1.0),
        alive_(tree_.size(), 1) {
    for (int u = 0; u < tree_.size(); ++u) {
      absl::Span<const double> row = problem.target.row(u);
      rows_[u].assign(row.begin(), row.end());
    }
    RecomputeSubtree(0);
  }

  absl::StatusOr<Verdict> Run(RandomSource& random) {
    while (true) {
      const int v = FirstLeaf();
      if (v == 0 || random.Bernoulli(alpha_[v])) {
        ASSIGN_OR_RETURN(int32_t extra, verifiers::DrawToken(rows_[v], random));
        return verifiers::MakeVerdict(tree_, v, extra);
      }
      Reject(v);
    }
  }

 private:
  // Descend through first remaining children.
  int FirstLeaf() const {
    int v = 0;
    while (true) {
      const int child = FirstAliveChild(v);
      if (child < 0) return v;
      v = child;
    }
  }

  int FirstAliveChild(int u) const {
    for (int c : tree_.children(u))
      if (alive_[c]) return c;
    return -1;
  }

  // Q~_u: the law the next child of u is tested against.
  std::vector<double> EffectiveQ(int u) const {
    if (problem_.sampling == DraftSampling::kWithoutReplacement) return verifiers::MaskedRow(shared_q_[u], tried_[u]);
    return std::vector<double>(shared_q_[u].begin(), shared_q_[u].end());
  }

  void Reject(int v) {
    const int u = tree_.parent(v);
    const std::vector<double> r = verifiers::PositivePart(rows_[u], EffectiveQ(u), alpha_[u]);
    const double mass = verifiers::Sum(r);
    const double denominator = mass + 1.0 - alpha_[u];
    alpha_[u] = denominator > 0.0 ? mass / denominator : 1.0;
    // No residual mass happens on probability-zero branches only; P_u is then
    // left as it was (any row is as good, and it keeps the draw well defined).
    verifiers::ReplaceWithNormalized(rows_[u], r);
    tried_[u].push_back(tree_.token(v));
    alive_[v] = 0;
    RecomputeSubtree(u);
  }

  void RecomputeSubtree(int u) {
    if (FirstAliveChild(u) < 0) return;
    const std::vector<double> q = EffectiveQ(u);
    for (int c : tree_.children(u)) {
      if (!alive_[c]) continue;
      const int32_t x = tree_.token(c);
      alpha_[c] = verifiers::AcceptProbability(alpha_[u] * rows_[u][x], q[x]);
      RecomputeSubtree(c);
    }
  }

  const VerificationProblem& problem_;
  const TokenTree& tree_;
  std::vector<absl::Span<const double>> shared_q_;  // per node: its children's q row
  std::vector<std::vector<double>> rows_;           // P_u
  std::vector<std::vector<int>> tried_;
  std::vector<double> alpha_;
  std::vector<char> alive_;
};

class TraversalVerifier final : public Verifier {
 public:
  VerifierTraits traits() const override {
    return {.losslessness = Losslessness::kLossless,
            .needs_draft_distributions = true,
            .chain_only = false,
            .needs_target_rows = true,
            .needs_shared_sibling_rows = true};
  }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const override {
    RETURN_IF_ERROR(verifiers::CheckTargetRows(problem, kName));
    RETURN_IF_ERROR(
        verifiers::CheckDraftRows(problem, kName, {DraftSampling::kIndependent, DraftSampling::kWithoutReplacement}));
    const TokenTree& tree = *problem.tree;
    std::vector<absl::Span<const double>> shared_q(tree.size());
    for (int u = 0; u < tree.size(); ++u) {
      if (tree.children(u).empty()) continue;
      ASSIGN_OR_RETURN(shared_q[u], verifiers::SharedSiblingRow(problem, u, kName));
    }
    TraversalState state(problem, std::move(shared_q));
    return state.Run(random);
  }
};

const bool kRegistered = VerifierRegistry::Add(
    {.name = kName,
     .description = "traversal verification, leaf-to-root with sequence weights (Weng et al. 2025, §1.10)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> {
       return std::make_unique<TraversalVerifier>();
     }});

}  // namespace
}  // namespace speclab
