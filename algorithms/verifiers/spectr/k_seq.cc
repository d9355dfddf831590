#include "algorithms/verifiers/spectr/k_seq.h"

#include <algorithm>
#include <cmath>

namespace speclab {
namespace verifiers {
namespace {

// Positive when ρ is too small (the accepted law would exceed p somewhere).
double Violation(absl::Span<const double> p, absl::Span<const double> q, int k, double rho) {
  const double beta = KSeqBeta(p, q, rho);
  return 1.0 - std::pow(1.0 - beta, k) - rho * beta;
}

}  // namespace

double KSeqBeta(absl::Span<const double> p, absl::Span<const double> q, double rho) {
  double beta = 0;
  for (size_t x = 0; x < p.size(); ++x) beta += std::min(q[x], p[x] / rho);
  return beta;
}

double KSeqRho(absl::Span<const double> p, absl::Span<const double> q, int k, int bisection_steps) {
  // k = 1 is plain speculative sampling; ρ = 1 also covers p = q and disjoint supports.
  if (k <= 1 || Violation(p, q, k, 1.0) <= 0.0) return 1.0;
  // The violation decreases in ρ and is <= 0 at ρ = k (Bernoulli's inequality).
  double lo = 1.0, hi = static_cast<double>(k);
  for (int i = 0; i < bisection_steps; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (Violation(p, q, k, mid) <= 0.0) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

double KSeqAcceptance(absl::Span<const double> p, absl::Span<const double> q, int k, double rho) {
  return 1.0 - std::pow(1.0 - KSeqBeta(p, q, rho), k);
}

std::vector<double> KSeqResidual(absl::Span<const double> p, absl::Span<const double> q, int k, double rho) {
  const double beta = KSeqBeta(p, q, rho);
  std::vector<double> residual(p.begin(), p.end());
  // β = 0: no draft can be accepted and the residual is p itself.
  if (!(beta > 0.0)) return residual;
  const double scale = KSeqAcceptance(p, q, k, rho) / beta;
  for (size_t y = 0; y < p.size(); ++y) residual[y] = std::max(0.0, p[y] - std::min(q[y], p[y] / rho) * scale);
  return residual;
}

}  // namespace verifiers
}  // namespace speclab
