// SpecTr's k-sequential selection (K-SEQ) at one position (§1.7).
//
// Exposed for tests and for anyone reproducing Sun et al.'s acceptance curves.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_K_SEQ_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_K_SEQ_H_

#include <vector>

#include "absl/types/span.h"

namespace speclab {
namespace verifiers {

// β(ρ) = Σ_x min(q(x), p(x)/ρ).
double KSeqBeta(absl::Span<const double> p, absl::Span<const double> q, double rho);

// The smallest ρ in [1, k] with 1 - (1-β(ρ))^k <= ρ β(ρ), by bisection. The
// returned value is always on the valid side of the root, so the residual
// below stays non-negative up to rounding; the loss of acceptance against the
// exact root is at most (k-1)·2^-steps in ρ.
double KSeqRho(absl::Span<const double> p, absl::Span<const double> q, int k, int bisection_steps);

// Probability that one of k i.i.d. drafts is accepted: 1 - (1-β(ρ))^k.
double KSeqAcceptance(absl::Span<const double> p, absl::Span<const double> q, int k, double rho);

// Law of the extra token after all k drafts were rejected:
// p(y) - min(q(y), p(y)/ρ)·(1-(1-β)^k)/β, clamped at 0 (unnormalised).
std::vector<double> KSeqResidual(absl::Span<const double> p, absl::Span<const double> q, int k, double rho);

}  // namespace verifiers
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_K_SEQ_H_
