#include "algorithms/verifiers/common/recursive_rejection.h"

#include "algorithms/verifiers/common/distribution.h"

namespace speclab {
namespace verifiers {

NodeOutcome RecursiveRejection(absl::Span<const double> target, absl::Span<const RejectionCandidate> candidates,
                               RandomSource& random) {
  NodeOutcome outcome;
  std::vector<double>& residual = outcome.residual;
  residual.assign(target.begin(), target.end());
  for (const RejectionCandidate& candidate : candidates) {
    const double accept = AcceptProbability(residual[candidate.token], candidate.q[candidate.token]);
    if (random.Bernoulli(accept)) {
      outcome.accepted_child = candidate.node;
      outcome.residual.clear();
      return outcome;
    }
    // A reject of probability zero (p~ = q_j, reached only through rounding)
    // leaves no residual mass; keeping p~ is then harmless.
    ReplaceWithNormalized(residual, PositivePart(residual, candidate.q));
  }
  return outcome;
}

}  // namespace verifiers
}  // namespace speclab
