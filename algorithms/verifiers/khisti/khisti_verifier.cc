// Canonical two-step multi-draft verification (Khisti et al., ICLR 2025; §1.8).
//
// Per node over its K children (i.i.d. draws from one shared q row):
//  1. select one distinct drafted token Y with α ∝ p/q, or with the optimised
//     selection (`selection: optimal`: the optimum acceptance; canonical_selection.h);
//  2. accept Y with min(1, p(Y)/r(Y)), r being the exact law of Y, and descend
//     into the first child carrying Y; otherwise stop and draw the extra token
//     from norm((p - r)+).
// Lossless for any selection rule because step 2 is plain SpS of Y ~ r against
// p. Acceptance per node is Σ min(p, r): with α ∝ p/q below the optimum
// min_S [p(S) + 1 - q(S)^K] of §1.8, with the optimised selection at it. Cost: computing r is O(s^K·K) per visited
// node (s = |supp q|); see `max_selection_tuples`.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/verifiers/common/distribution.h"
#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "algorithms/verifiers/khisti/canonical_selection.h"
#include "algorithms/verifiers/khisti/khisti_options.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "khisti";

class KhistiVerifier final : public Verifier {
 public:
  KhistiVerifier(double max_selection_tuples, khisti::Selection selection)
      : max_selection_tuples_(max_selection_tuples), selection_(selection) {}

  VerifierTraits traits() const override {
    return {.losslessness = Losslessness::kLossless,
            .needs_draft_distributions = true,
            .chain_only = false,
            .needs_target_rows = true,
            .needs_shared_sibling_rows = true};
  }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const override {
    RETURN_IF_ERROR(verifiers::CheckTargetRows(problem, kName));
    RETURN_IF_ERROR(verifiers::CheckDraftRows(problem, kName, {DraftSampling::kIndependent}));
    return verifiers::WalkTree(problem, random, [&](int node) { return VerifyNode(problem, node, random); });
  }

 private:
  absl::StatusOr<verifiers::NodeOutcome> VerifyNode(const VerificationProblem& problem, int node,
                                                    RandomSource& random) const {
    const TokenTree& tree = *problem.tree;
    ASSIGN_OR_RETURN(absl::Span<const double> q, verifiers::SharedSiblingRow(problem, node, kName));
    absl::Span<const double> p = problem.target.row(node);
    const std::vector<int>& children = tree.children(node);
    const int k = static_cast<int>(children.size());
    if (verifiers::SelectionTupleCount(q, k) > max_selection_tuples_)
      return absl::InvalidArgumentError(
          absl::StrCat(kName, ": the exact selection law needs |supp q|^K = ", verifiers::SelectionTupleCount(q, k),
                       " tuples at node ", node, ", above max_selection_tuples = ", max_selection_tuples_));

    // Step 1: choose among the distinct drafted tokens.
    std::vector<int32_t> distinct;
    for (int child : children)
      if (std::find(distinct.begin(), distinct.end(), tree.token(child)) == distinct.end())
        distinct.push_back(tree.token(child));
    std::vector<double> weights, r;
    if (selection_ == khisti::Selection::kOptimal) {
      verifiers::OptimizedSelection optimal = verifiers::OptimizeSelection(p, q, k);
      std::vector<int32_t> set = distinct;
      std::sort(set.begin(), set.end());
      const std::vector<double>& by_token = optimal.weights.at(set);
      for (int32_t x : distinct) weights.push_back(by_token[std::lower_bound(set.begin(), set.end(), x) - set.begin()]);
      r = std::move(optimal.law);
    } else {
      weights = verifiers::SelectionWeights(p, q, distinct);
      r = verifiers::SelectionLaw(p, q, k);
    }
    const int32_t selected = distinct[random.Categorical(weights)];

    // Step 2: single-draft SpS of the selected token against its exact law r.
    verifiers::NodeOutcome outcome;
    if (random.Bernoulli(verifiers::AcceptProbability(p[selected], r[selected]))) {
      outcome.accepted_child = tree.FindChild(node, selected);
      return outcome;
    }
    outcome.residual.assign(p.begin(), p.end());
    verifiers::ReplaceWithNormalized(outcome.residual, verifiers::PositivePart(p, r));  // p = r: rounding only
    return outcome;
  }

  double max_selection_tuples_;
  khisti::Selection selection_;
};

const bool kRegistered = VerifierRegistry::Add(
    {.name = kName,
     .description = "Khisti canonical two-step: p/q selection (selection: optimal, the max-flow optimum) + SpS against "
                    "the exact selection law (§1.8)",
     .lossless = "lossless",
     .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<Verifier>> {
       ASSIGN_OR_RETURN(double limit, khisti::ReadMaxSelectionTuples(options));
       ASSIGN_OR_RETURN(khisti::Selection selection, khisti::ReadSelection(options));
       return std::make_unique<KhistiVerifier>(limit, selection);
     }});

}  // namespace
}  // namespace speclab
