// The selection step of Khisti et al.'s canonical two-step scheme (§1.8).
//
// From K i.i.d. drafts X_1..X_K ~ q, pick one distinct drafted token y with
// probability α(y | X̄): ∝ p(y)/q(y) (an importance-weight rule; uniform among
// the distinct tokens when every weight is 0), or the optimised rule below. Step 2 then runs single-draft
// speculative sampling of Y against p, which needs the exact law of Y:
//   r(y) = Σ_x̄ Π_k q(x_k) · α(y | x̄).
// SelectionLaw computes r by enumerating every K-tuple over the support of q:
// s^K tuples of K work each (s = |supp q|), i.e. O(s^K·K) time and O(V) memory
// per node. That is exact and fine for small supports (top-k drafters, toy
// tables); for a full 32k vocabulary at K = 2 it is ~10^9 tuples, which the
// verifier refuses above its `max_selection_tuples` option.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_CANONICAL_SELECTION_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_CANONICAL_SELECTION_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/types/span.h"

namespace speclab {
namespace verifiers {

// Selection weights α(· | drafted) over `distinct_tokens` (unnormalised).
std::vector<double> SelectionWeights(absl::Span<const double> p, absl::Span<const double> q,
                                     absl::Span<const int32_t> distinct_tokens);

// Number of K-tuples SelectionLaw enumerates: |supp q|^K (saturating).
double SelectionTupleCount(absl::Span<const double> q, int k);

// r(y) for all y, exactly (see the file comment for the cost).
std::vector<double> SelectionLaw(absl::Span<const double> p, absl::Span<const double> q, int k);

// The optimised selection (the paper's first step solved, not a fixed
// weighting): for each set S of distinct drafted tokens, weights over S
// under which Σ_y min(p(y), r(y)) reaches the optimum min_T p(T) + 1 −
// q(T)^K (framework/core/speculation_theory.h). It is a maximum flow: each
// set's probability under K i.i.d. draws flows to its tokens, each token y
// passing at most p(y) on to the sink; S selects y with the share of its
// probability that flowed to y, and what did not flow goes to S's token of
// largest p. The flow's value is the optimum (max-flow/min-cut), and r ≥
// the flow token by token, so Σ min(p, r) reaches it. Step 2 reads r, the
// exact law of the selection, so the rule is lossless whatever the flow's
// rounding. Enumerates |supp q|^K tuples, as SelectionLaw does.
struct OptimizedSelection {
  std::map<std::vector<int32_t>, std::vector<double>> weights;  // sorted set S -> weights over S (sum 1)
  std::vector<double> law;                                       // r(y), the selected token's exact law
};
OptimizedSelection OptimizeSelection(absl::Span<const double> p, absl::Span<const double> q, int k);

}  // namespace verifiers
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_CANONICAL_SELECTION_H_
