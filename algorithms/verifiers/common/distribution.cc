#include "algorithms/verifiers/common/distribution.h"

#include <algorithm>

namespace speclab {
namespace verifiers {

double Sum(absl::Span<const double> v) {
  double total = 0;
  for (double x : v) total += x;
  return total;
}

std::vector<double> PositivePart(absl::Span<const double> p, absl::Span<const double> q, double scale) {
  std::vector<double> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = std::max(0.0, scale * p[i] - q[i]);
  return out;
}

double AcceptProbability(double numerator, double denominator) {
  if (denominator <= 0.0 || numerator <= 0.0) return 0.0;
  if (numerator >= denominator) return 1.0;
  return numerator / denominator;
}

bool ReplaceWithNormalized(std::vector<double>& dist, const std::vector<double>& candidate) {
  const double total = Sum(candidate);
  if (!(total > 0.0)) return false;
  dist.resize(candidate.size());
  for (size_t i = 0; i < candidate.size(); ++i) dist[i] = candidate[i] / total;
  return true;
}

bool NormalizeInPlace(std::vector<double>& dist) {
  const double total = Sum(dist);
  if (!(total > 0.0)) return false;
  for (double& x : dist) x /= total;
  return true;
}

std::vector<double> MaskedRow(absl::Span<const double> q, absl::Span<const int> removed_tokens) {
  std::vector<double> out(q.begin(), q.end());
  for (int token : removed_tokens) out[token] = 0.0;
  const double total = Sum(out);
  if (!(total > 0.0)) return std::vector<double>(q.size(), 0.0);
  for (double& x : out) x /= total;
  return out;
}

}  // namespace verifiers
}  // namespace speclab
