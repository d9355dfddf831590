// Medusa typical acceptance (Cai et al., ICML 2024; §1.11). LOSSY.
//
// With p the temperature-processed target rows (what `target` holds):
//   H = -Σ p log(p + 1e-5);  thr = min(ε, δ·exp(-H));
//   a drafted token x passes iff p(x) > thr at its parent;
// keep the longest all-pass prefix over root-to-leaf paths, break ties by the
// largest Σ log p (Medusa's fast mode; the first path on exact ties) and emit
// argmax p after it (fast=True, the default). Deterministic: no randomness.
// At T = 0 the one-hot rows make it exact match. ε and δ are both read
// explicitly because Medusa's function signatures swap their defaults (§7).
#include <cmath>
#include <memory>
#include <vector>

#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "algorithms/verifiers/typical/typical_options.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "typical";
using typical::kEntropyEpsilon;

class TypicalVerifier final : public Verifier {
 public:
  TypicalVerifier(double threshold, double alpha) : threshold_(threshold), alpha_(alpha) {}

  VerifierTraits traits() const override {
    return {.losslessness = Losslessness::kLossy,
            .needs_draft_distributions = false,
            .chain_only = false,
            .needs_target_rows = true};
  }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource&) const override {
    RETURN_IF_ERROR(verifiers::CheckTargetRows(problem, kName));
    const TokenTree& tree = *problem.tree;
    std::vector<double> node_threshold(tree.size());
    for (int u = 0; u < tree.size(); ++u) node_threshold[u] = Threshold(problem.target.row(u));

    int best = 0;
    double best_likelihood = 0;
    for (int leaf : tree.Leaves()) {
      int end = 0;
      double likelihood = 0;
      for (int node : tree.PathTo(leaf)) {
        if (node == 0) continue;
        const double prob = problem.target.row(tree.parent(node))[tree.token(node)];
        if (!(prob > node_threshold[tree.parent(node)])) break;
        end = node;
        likelihood += std::log(prob);
      }
      const bool longer = tree.depth(end) > tree.depth(best);
      const bool likelier = tree.depth(end) == tree.depth(best) && tree.depth(end) > 0 && likelihood > best_likelihood;
      if (longer || likelier) {
        best = end;
        best_likelihood = likelihood;
      }
    }
    return verifiers::MakeVerdict(tree, best, problem.target_argmax[best]);
  }

 private:
  double Threshold(absl::Span<const double> p) const {
    double entropy = 0;
    for (double v : p) entropy -= v * std::log(v + kEntropyEpsilon);
    return std::min(threshold_, alpha_ * std::exp(-entropy));
  }

  double threshold_;
  double alpha_;
};

const bool kRegistered = VerifierRegistry::Add(
    {.name = kName,
     .description = "Medusa typical acceptance (§1.11): posterior_threshold ε, posterior_alpha δ; lossy",
     .lossless = "lossy",
     .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<Verifier>> {
       ASSIGN_OR_RETURN(typical::TypicalOptions o, typical::ReadTypicalOptions(options));
       return std::make_unique<TypicalVerifier>(o.threshold, o.alpha);
     }});

}  // namespace
}  // namespace speclab
