// Recursive rejection sampling without replacement (RSD; EAGLE-1, Sequoia; §1.6).
//
// Siblings c_1..c_k were drawn in order without replacement from one row q,
// so c_j ~ q_j := norm(q with {c_<j} zeroed). Both the acceptance test and
// the residual update use that masked q_j (EAGLE-1 computes q_j(c_j) as
// q(c_j) / (1 - sum_{i<j} q(c_i))). Using the unmasked q here is lossy.
#include <memory>
#include <vector>

#include "algorithms/verifiers/common/distribution.h"
#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/recursive_rejection.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "rrs_wor";

class RrsWithoutReplacementVerifier final : public Verifier {
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
    RETURN_IF_ERROR(verifiers::CheckDraftRows(problem, kName, {DraftSampling::kWithoutReplacement}));
    const TokenTree& tree = *problem.tree;
    return verifiers::WalkTree(problem, random, [&](int node) -> absl::StatusOr<verifiers::NodeOutcome> {
      ASSIGN_OR_RETURN(absl::Span<const double> q, verifiers::SharedSiblingRow(problem, node, kName));
      const std::vector<int>& children = tree.children(node);
      // masked[j] is the law of the j-th draw given the earlier siblings. A
      // repeated token (impossible without replacement) gets q_j(c_j) = 0 and
      // is therefore rejected.
      std::vector<std::vector<double>> masked(children.size());
      std::vector<int> earlier;
      std::vector<verifiers::RejectionCandidate> candidates;
      for (size_t j = 0; j < children.size(); ++j) {
        masked[j] = verifiers::MaskedRow(q, earlier);
        const int32_t token = tree.token(children[j]);
        candidates.push_back({children[j], token, masked[j]});
        earlier.push_back(token);
      }
      return verifiers::RecursiveRejection(problem.target.row(node), candidates, random);
    });
  }
};

const bool kRegistered = VerifierRegistry::Add(
    {.name = kName,
     .description = "recursive rejection sampling without replacement, masked q_j (RSD/EAGLE-1/Sequoia, §1.6)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> {
       return std::make_unique<RrsWithoutReplacementVerifier>();
     }});

}  // namespace
}  // namespace speclab
