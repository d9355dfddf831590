// The closed forms of speculative decoding that speclab predicts with and
// compares against (docs/algorithms.md §5): one home for each formula, used by
// the plugins that plan with it (cost_aware, sequoia) and by the tests that
// hold verifiers to their limits. Torch-free.
#ifndef SPECLAB_FRAMEWORK_CORE_SPECULATION_THEORY_H_
#define SPECLAB_FRAMEWORK_CORE_SPECULATION_THEORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab::theory {

// --- Chains (Leviathan et al. 2023, §3.1-3.4) -------------------------------
// Each of γ drafts is accepted with probability α until the first rejection.

// Expected tokens a step emits, the extra token included:
// (1 − α^(γ+1)) / (1 − α); γ + 1 at α = 1.
double ChainExpectedTokens(double alpha, int gamma);

// Expected walltime improvement over autoregressive decoding when a draft
// costs c target forwards and verifying γ drafts costs one:
// (1 − α^(γ+1)) / ((1 − α)(γc + 1)).
double ChainWalltimeImprovement(double alpha, int gamma, double c);

// The γ in [1, max_gamma] with the largest walltime improvement (the smallest
// on ties); 0 if even γ = 1 does not beat autoregressive decoding.
int OptimalChainLength(double alpha, double c, int max_gamma);

// --- Trees (positional acceptance, Sequoia's model) -------------------------
// A tree as choices: each node the 0-based rank path from the root (root
// excluded), prefix-closed. acceptance[k] = P(the child of rank k is the
// accepted one, given its parent was), ranks past its end never are.

// Expected tokens a step emits: 1 + Σ_nodes Π_{edges on its path} acceptance[rank].
double TreeExpectedTokens(const std::vector<std::vector<int64_t>>& choices, const std::vector<double>& acceptance);

// --- Multiple drafts (Khisti et al. 2024, Theorem 3) ------------------------
// The largest probability that any verifier's output is one of K drafts drawn
// i.i.d. from q while the output keeps the law p: the maximal coupling of the
// K-tuple with the output, by max-flow/min-cut
//   α*(K) = min over T ⊆ vocabulary of  p(T) + 1 − q(T)^K,
// enumerated over every subset (a vocabulary of at most 24 tokens). K = 1
// gives 1 − TV(p, q), the acceptance of Chen et al.'s rule.
absl::StatusOr<double> OptimalMultiDraftAcceptance(const std::vector<double>& p, const std::vector<double>& q, int k);

}  // namespace speclab::theory

#endif  // SPECLAB_FRAMEWORK_CORE_SPECULATION_THEORY_H_
