// Greedy exact match (docs/algorithms.md §1.1).
//
// Keeps the longest root-to-leaf prefix whose every token is the target's
// argmax (first path on ties) and appends the argmax after it. Lossless with
// respect to greedy decoding, i.e. when the target rows are one-hot (T = 0);
// it reads only target_argmax, so it cannot preserve any other law.
#include <memory>
#include <vector>

#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

constexpr char kName[] = "greedy";

class GreedyVerifier final : public Verifier {
 public:
  VerifierTraits traits() const override {
    return {.losslessness = Losslessness::kLossless,
            .needs_draft_distributions = false,
            .chain_only = false,
            .needs_target_rows = false};
  }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource&) const override {
    RETURN_IF_ERROR(verifiers::CheckTreeAndArgmax(problem, kName));
    const TokenTree& tree = *problem.tree;
    const int best = DeepestMatchedNode(tree, problem.target_argmax);
    return verifiers::MakeVerdict(tree, best, problem.target_argmax[best]);
  }

 private:
  // The deepest node whose whole path matches the argmax, taking the first
  // leaf's path on ties (Medusa/EAGLE `evaluate_posterior` order).
  static int DeepestMatchedNode(const TokenTree& tree, const std::vector<int32_t>& argmax) {
    // Parents precede children, so one forward pass marks matched paths.
    std::vector<char> matched(tree.size(), 0);
    matched[0] = 1;
    for (int i = 1; i < tree.size(); ++i)
      matched[i] = matched[tree.parent(i)] && tree.token(i) == argmax[tree.parent(i)];
    int best = 0;
    for (int leaf : tree.Leaves()) {
      int node = leaf;
      while (!matched[node]) node = tree.parent(node);
      if (tree.depth(node) > tree.depth(best)) best = node;
    }
    return best;
  }
};

const bool kRegistered =
    VerifierRegistry::Add({.name = kName,
                           .description = "greedy exact match on trees (§1.1); lossless w.r.t. greedy decoding (T=0)",
                           .lossless = "lossless",
                           .create = [](Options&) -> absl::StatusOr<std::unique_ptr<Verifier>> {
                             return std::make_unique<GreedyVerifier>();
                           }});

}  // namespace
}  // namespace speclab
