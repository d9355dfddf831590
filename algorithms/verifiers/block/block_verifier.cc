// Block verification (Sun, Mendlovic, Leviathan et al., ICLR 2025; §1.9).
//
// Keeps the longest prefix that passes a sequence-level test instead of
// stopping at the first token-level failure. With p_i = p(·|c, x_<i) and
// q_i = q(·|c, x_<i):
//   w_0 = 1, w_i = min(1, w_{i-1} p_i(x_i)/q_i(x_i));
//   r_i = (w_i p_{i+1} - q_{i+1})+;  h_i = Σr_i / (Σr_i + 1 - w_i), h_0 = 1, h_γ = w_γ;
//   scan i = γ..0 with fresh Bernoulli(h_i); τ = first success;
//   emit x_1..x_τ, then y ~ p_{γ+1} if τ = γ else y ~ norm(r_τ).
// Degenerate case (§1.9): Σr_i + 1 - w_i = 0 forces w_i = 1 and p = q, where
// h_i = 1. Never accepts less than token-wise rejection (tested).
#include <memory>
#include <vector>

#include "algorithms/verifiers/common/distribution.h"
#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "block";

class BlockVerifier final : public Verifier {
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
    const std::vector<int> path = ChainPath(tree);  // path[i] = node of x_i, path[0] = root
    const int gamma = static_cast<int>(path.size()) - 1;
    const std::vector<double> w = SequenceWeights(problem, path);

    for (int i = gamma; i >= 0; --i) {
      absl::Span<const double> next_p = problem.target.row(path[i]);  // p_{i+1}
      if (i == gamma) {
        if (!random.Bernoulli(w[gamma])) continue;
        ASSIGN_OR_RETURN(int32_t extra, verifiers::DrawToken(next_p, random));
        return verifiers::MakeVerdict(tree, path[i], extra);
      }
      const std::vector<double> r = verifiers::PositivePart(next_p, problem.draft.row(path[i + 1]), w[i]);
      const double mass = verifiers::Sum(r);
      const double denominator = mass + 1.0 - w[i];
      const double h = (i == 0 || !(denominator > 0.0)) ? 1.0 : mass / denominator;
      if (i > 0 && !random.Bernoulli(h)) continue;
      // r_τ has no mass only on the degenerate, probability-zero branch.
      std::vector<double> extra_law(next_p.begin(), next_p.end());
      verifiers::ReplaceWithNormalized(extra_law, r);
      ASSIGN_OR_RETURN(int32_t extra, verifiers::DrawToken(extra_law, random));
      return verifiers::MakeVerdict(tree, path[i], extra);
    }
    return absl::InternalError("block: the scan ended without stopping at i = 0");
  }

 private:
  static std::vector<int> ChainPath(const TokenTree& tree) {
    int last = 0;
    while (!tree.children(last).empty()) last = tree.children(last).front();
    return tree.PathTo(last);
  }

  // w_i for i = 0..γ; a token with q_i(x_i) = 0 (or any earlier zero weight) gives 0.
  static std::vector<double> SequenceWeights(const VerificationProblem& problem, const std::vector<int>& path) {
    std::vector<double> w(path.size(), 1.0);
    for (size_t i = 1; i < path.size(); ++i) {
      const int32_t x = problem.tree->token(path[i]);
      const double p = problem.target.row(path[i - 1])[x];
      const double q = problem.draft.row(path[i])[x];
      w[i] = verifiers::AcceptProbability(w[i - 1] * p, q);
    }
    return w;
  }
};

const bool kRegistered = VerifierRegistry::Add(
    {.name = kName,
     .description = "block verification, longest passing prefix of a chain (Sun et al. 2025, §1.9); needs q",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> {
       return std::make_unique<BlockVerifier>();
     }});

}  // namespace
}  // namespace speclab
