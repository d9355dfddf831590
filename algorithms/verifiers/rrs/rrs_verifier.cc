// Recursive rejection sampling with replacement (§1.5 with i.i.d. siblings).
//
// The same recursion as specinfer (and identical verdicts when every sibling
// carries the same row), but derived for the case RRS papers study: all
// children of a node drawn i.i.d. from one shared q row. It insists on that
// shared row, so a tree whose siblings came from different drafters is
// refused rather than verified under an assumption that does not hold.
#include <memory>
#include <vector>

#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/recursive_rejection.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "rrs";

class RrsVerifier final : public Verifier {
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
    RETURN_IF_ERROR(verifiers::CheckDraftRows(problem, kName, {DraftSampling::kIndependent}));
    const TokenTree& tree = *problem.tree;
    return verifiers::WalkTree(problem, random, [&](int node) -> absl::StatusOr<verifiers::NodeOutcome> {
      ASSIGN_OR_RETURN(absl::Span<const double> q, verifiers::SharedSiblingRow(problem, node, kName));
      std::vector<verifiers::RejectionCandidate> candidates;
      for (int child : tree.children(node)) candidates.push_back({child, tree.token(child), q});
      return verifiers::RecursiveRejection(problem.target.row(node), candidates, random);
    });
  }
};

const bool kRegistered = VerifierRegistry::Add(
    {.name = kName,
     .description = "recursive rejection sampling with replacement, i.i.d. siblings from one q row (§1.5)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> { return std::make_unique<RrsVerifier>(); }});

}  // namespace
}  // namespace speclab
