// Point-mass rule / sample-then-match for token-only drafts (§1.4).
//
// At each node the children are tried in order: child c is accepted with
// probability p~(c), otherwise p~(c) <- 0 and p~ is renormalised, so a
// duplicate sibling is rejected with probability 1. Equivalent to drawing
// one y ~ p per node and descending into the child equal to y; lossless for
// any drafter whose randomness is independent of the verifier's, which is why
// it ignores q and every sampling mode is fine.
#include <memory>
#include <vector>

#include "algorithms/verifiers/common/distribution.h"
#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "point_mass";

class PointMassVerifier final : public Verifier {
 public:
  VerifierTraits traits() const override {
    return {.losslessness = Losslessness::kLossless,
            .needs_draft_distributions = false,
            .chain_only = false,
            .needs_target_rows = true};
  }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const override {
    RETURN_IF_ERROR(verifiers::CheckTargetRows(problem, kName));
    const TokenTree& tree = *problem.tree;
    return verifiers::WalkTree(problem, random, [&](int node) -> absl::StatusOr<verifiers::NodeOutcome> {
      verifiers::NodeOutcome outcome;
      absl::Span<const double> target = problem.target.row(node);
      std::vector<double>& residual = outcome.residual;
      residual.assign(target.begin(), target.end());
      // p~ may be unnormalised (float32 rows): test against the normalised value.
      if (!verifiers::NormalizeInPlace(residual))
        return absl::InvalidArgumentError("point_mass: target row without mass");
      for (int child : tree.children(node)) {
        const int32_t token = tree.token(child);
        if (random.Bernoulli(residual[token])) {
          outcome.accepted_child = child;
          return outcome;
        }
        std::vector<double> next = residual;
        next[token] = 0.0;
        // All mass on rejected tokens is a probability-zero event (rounding only).
        verifiers::ReplaceWithNormalized(residual, next);
      }
      return outcome;
    });
  }
};

const bool kRegistered =
    VerifierRegistry::Add({.name = kName,
                           .description = "point-mass / sample-then-match for token-only drafts on trees (§1.4); no q",
                           .lossless = "lossless",
                           .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> {
                             return std::make_unique<PointMassVerifier>();
                           }});

}  // namespace
}  // namespace speclab
