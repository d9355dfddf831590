// SpecTr K-SEQ verification of i.i.d. draft sequences (Sun et al.; §1.7).
//
// At each depth the candidates are the children of every node whose path
// carries the accepted prefix, so duplicated first tokens pool their
// continuations, as K drafted sequences do. Given the prefix those
// continuations are i.i.d. from q(·|prefix), and K-SEQ with k = their count
// is exact. Drafts are tried in order with min(1, p(x)/(ρ* q(x))); if all
// fail, the extra token comes from the K-SEQ residual. Needs i.i.d. siblings
// (independent sampling with one shared row).
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/verifiers/common/distribution.h"
#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "algorithms/verifiers/spectr/k_seq.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "spectr";
constexpr int64_t kDefaultBisectionSteps = 60;

class SpecTrVerifier final : public Verifier {
 public:
  explicit SpecTrVerifier(int bisection_steps) : bisection_steps_(bisection_steps) {}

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
    std::vector<int> group = {0};  // nodes carrying the accepted prefix
    int accepted = 0;
    while (true) {
      const std::vector<int> candidates = ChildrenOf(tree, group);
      absl::Span<const double> p = problem.target.row(accepted);
      if (candidates.empty()) {
        ASSIGN_OR_RETURN(int32_t extra, verifiers::DrawToken(p, random));
        return verifiers::MakeVerdict(tree, accepted, extra);
      }
      ASSIGN_OR_RETURN(absl::Span<const double> q, SharedRow(problem, candidates));
      const int k = static_cast<int>(candidates.size());
      const double rho = verifiers::KSeqRho(p, q, k, bisection_steps_);
      const int chosen = TryCandidates(tree, candidates, p, q, rho, random);
      if (chosen < 0) {
        std::vector<double> residual = verifiers::KSeqResidual(p, q, k, rho);
        if (!(verifiers::Sum(residual) > 0.0)) residual.assign(p.begin(), p.end());  // rounding only
        ASSIGN_OR_RETURN(int32_t extra, verifiers::DrawToken(residual, random));
        return verifiers::MakeVerdict(tree, accepted, extra);
      }
      accepted = chosen;
      group.clear();
      for (int c : candidates)
        if (tree.token(c) == tree.token(chosen)) group.push_back(c);
    }
  }

 private:
  static std::vector<int> ChildrenOf(const TokenTree& tree, const std::vector<int>& group) {
    std::vector<int> children;
    for (int node : group)
      for (int child : tree.children(node)) children.push_back(child);
    return children;
  }

  // The candidates at one depth come from possibly several parents with the
  // same context; all must carry the same q row for the i.i.d. assumption.
  static absl::StatusOr<absl::Span<const double>> SharedRow(const VerificationProblem& problem,
                                                            const std::vector<int>& candidates) {
    absl::Span<const double> shared = problem.draft.row(candidates.front());
    for (int c : candidates) {
      if (!verifiers::SameDraftRow(problem.draft.row(c), shared))
        return absl::InvalidArgumentError(absl::StrCat(
            kName, ": drafts continuing the same prefix carry different q rows; K-SEQ needs i.i.d. drafts"));
    }
    return shared;
  }

  static int TryCandidates(const TokenTree& tree, const std::vector<int>& candidates, absl::Span<const double> p,
                           absl::Span<const double> q, double rho, RandomSource& random) {
    for (int c : candidates) {
      const int32_t x = tree.token(c);
      if (random.Bernoulli(verifiers::AcceptProbability(p[x], rho * q[x]))) return c;
    }
    return -1;
  }

  int bisection_steps_;
};

const bool kRegistered = VerifierRegistry::Add(
    {.name = kName,
     .description = "SpecTr K-SEQ per depth over i.i.d. drafts consistent with the accepted prefix (§1.7)",
     .lossless = "lossless",
     .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<Verifier>> {
       ASSIGN_OR_RETURN(int64_t steps, options.GetIntIn("bisection_steps", kDefaultBisectionSteps, 1, 200));
       return std::make_unique<SpecTrVerifier>(static_cast<int>(steps));
     }});

}  // namespace
}  // namespace speclab
