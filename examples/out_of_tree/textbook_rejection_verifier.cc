// `textbook_rejection`: Chen et al. (2023)'s chain rule written out in full,
// with nothing but the Verifier interface (the built-in `rejection` has the
// same law and a device form). Position i is accepted with probability
// min(1, p_i(x_i) / q_i(x_i)); the first rejection emits y ~ norm((p_i - q_i)+);
// a fully accepted chain emits y ~ p after its last token.
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/verifier_registry.h"

namespace speclab_example {
namespace {

using speclab::Verdict;
using speclab::VerificationProblem;

class TextbookRejectionVerifier final : public speclab::Verifier {
 public:
  speclab::VerifierTraits traits() const override {
    return {.losslessness = speclab::Losslessness::kLossless, .needs_draft_distributions = true, .chain_only = true};
  }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, speclab::RandomSource& random) const override {
    const speclab::TokenTree& tree = *problem.tree;
    if (problem.draft.empty() && tree.size() > 1)
      return absl::InvalidArgumentError("textbook_rejection needs the draft distributions q");
    Verdict verdict;
    int node = 0;
    while (!tree.children(node).empty()) {
      if (tree.children(node).size() > 1) return absl::InvalidArgumentError("textbook_rejection verifies chains");
      const int child = tree.children(node).front();
      const int32_t x = tree.token(child);
      const auto p = problem.target.row(node);
      const auto q = problem.draft.row(child);
      if (q[x] > 0 && random.Bernoulli(std::min(1.0, p[x] / q[x]))) {
        verdict.accepted.push_back(child);
        node = child;
        continue;
      }
      std::vector<double> residual(p.size());
      double mass = 0;
      for (size_t v = 0; v < p.size(); ++v) mass += residual[v] = std::max(0.0, p[v] - q[v]);
      // No residual mass (p == q up to rounding): p itself is the right law.
      verdict.extra_token = mass > 0 ? random.Categorical(residual) : random.Categorical(p);
      return verdict;
    }
    verdict.extra_token = random.Categorical(problem.target.row(node));
    return verdict;
  }
};

const bool kRegistered = speclab::VerifierRegistry::Add(
    {.name = "textbook_rejection",
     .description = "Chen et al.'s chain rule in one file (out-of-tree example); needs q",
     .lossless = "lossless",
     .create = [](speclab::Options&) -> absl::StatusOr<std::unique_ptr<speclab::Verifier>> {
       return std::make_unique<TextbookRejectionVerifier>();
     }});

}  // namespace
}  // namespace speclab_example
