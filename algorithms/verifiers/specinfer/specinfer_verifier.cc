// SpecInfer multi-step speculative sampling (Miao et al.; §1.5).
//
// Children c_j ~ q^(j) are drawn independently, each from its own row (one
// drafter per child, or the same row i.i.d.). Sibling j is tried against the
// running residual p~ with its own q^(j): accept w.p. min(1, p~(c_j)/q^(j)(c_j)),
// else p~ <- norm((p~ - q^(j))+). Exact only for independent draws: siblings
// drawn without replacement need rrs_wor's masked rows.
#include <memory>
#include <vector>

#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/recursive_rejection.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "specinfer";

class SpecInferVerifier final : public Verifier {
 public:
  VerifierTraits traits() const override {
    return {.losslessness = Losslessness::kLossless,
            .needs_draft_distributions = true,
            .chain_only = false,
            .needs_target_rows = true};
  }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const override {
    RETURN_IF_ERROR(verifiers::CheckTargetRows(problem, kName));
    RETURN_IF_ERROR(verifiers::CheckDraftRows(problem, kName, {DraftSampling::kIndependent}));
    const TokenTree& tree = *problem.tree;
    return verifiers::WalkTree(problem, random, [&](int node) -> absl::StatusOr<verifiers::NodeOutcome> {
      std::vector<verifiers::RejectionCandidate> candidates;
      for (int child : tree.children(node)) candidates.push_back({child, tree.token(child), problem.draft.row(child)});
      return verifiers::RecursiveRejection(problem.target.row(node), candidates, random);
    });
  }
};

const bool kRegistered =
    VerifierRegistry::Add({.name = kName,
                           .description = "SpecInfer multi-step SpS over siblings, one q row per child (§1.5)",
                           .lossless = "lossless",
                           .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> {
                             return std::make_unique<SpecInferVerifier>();
                           }});

}  // namespace
}  // namespace speclab
