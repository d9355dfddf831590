// Chain speculative sampling (Leviathan et al.; Chen et al.; §1.2).
//
// Position i is accepted with probability min(1, p_i(x_i) / q_i(x_i)); the
// first reject emits y ~ norm((p_i - q_i)+), and a fully accepted chain emits
// the bonus y ~ p_{γ+1}. On a chain "without replacement" draws are the same
// law as independent ones (one draw per node), so both modes are exact.
#include <memory>

#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/recursive_rejection.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "rejection";

class RejectionVerifier final : public Verifier {
 public:
  VerifierTraits traits() const override {
    return {.losslessness = Losslessness::kLossless,
            .needs_draft_distributions = true,
            .chain_only = true,
            .needs_target_rows = true};
  }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const override {
    RETURN_IF_ERROR(verifiers::CheckTargetRows(problem, kName));
    RETURN_IF_ERROR(verifiers::CheckChain(problem, kName));
    RETURN_IF_ERROR(
        verifiers::CheckDraftRows(problem, kName, {DraftSampling::kIndependent, DraftSampling::kWithoutReplacement}));
    const TokenTree& tree = *problem.tree;
    return verifiers::WalkTree(problem, random, [&](int node) -> absl::StatusOr<verifiers::NodeOutcome> {
      const int child = tree.children(node).front();
      const verifiers::RejectionCandidate candidate{child, tree.token(child), problem.draft.row(child)};
      return verifiers::RecursiveRejection(problem.target.row(node), {&candidate, 1}, random);
    });
  }
};

const bool kRegistered =
    VerifierRegistry::Add({.name = kName,
                           .description = "chain speculative sampling, Leviathan/Chen (§1.2); needs q",
                           .lossless = "lossless",
                           .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> {
                             return std::make_unique<RejectionVerifier>();
                           }});

}  // namespace
}  // namespace speclab
