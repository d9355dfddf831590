#include "algorithms/verifiers/khisti/canonical_selection.h"

#include <algorithm>
#include <cmath>

namespace speclab {
namespace verifiers {

namespace {

// The importance weight p(x)/q(x) of a drafted token (0 if q(x) = 0: it
// cannot have been drafted).
double ImportanceWeight(absl::Span<const double> p, absl::Span<const double> q, int32_t x) {
  return q[x] > 0.0 ? p[x] / q[x] : 0.0;
}

}  // namespace

std::vector<double> SelectionWeights(absl::Span<const double> p, absl::Span<const double> q,
                                     absl::Span<const int32_t> distinct_tokens) {
  std::vector<double> weights(distinct_tokens.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < distinct_tokens.size(); ++i) {
    weights[i] = ImportanceWeight(p, q, distinct_tokens[i]);
    total += weights[i];
  }
  // No drafted token is possible under p: any fixed rule is exact, take uniform.
  if (!(total > 0.0)) std::fill(weights.begin(), weights.end(), 1.0);
  return weights;
}

double SelectionTupleCount(absl::Span<const double> q, int k) {
  const double support = static_cast<double>(std::count_if(q.begin(), q.end(), [](double v) { return v > 0.0; }));
  return std::pow(support, k);
}

std::vector<double> SelectionLaw(absl::Span<const double> p, absl::Span<const double> q, int k) {
  std::vector<int32_t> support;
  for (size_t x = 0; x < q.size(); ++x)
    if (q[x] > 0.0) support.push_back(static_cast<int32_t>(x));
  std::vector<double> law(q.size(), 0.0);
  if (support.empty() || k <= 0) return law;
  std::vector<double> weight(q.size(), 0.0);
  for (int32_t x : support) weight[x] = ImportanceWeight(p, q, x);
  // Odometer over support^k.
  std::vector<int> digits(k, 0);
  std::vector<int32_t> distinct;
  distinct.reserve(k);
  while (true) {
    double probability = 1.0;
    distinct.clear();
    for (int d : digits) {
      const int32_t x = support[d];
      probability *= q[x];
      if (std::find(distinct.begin(), distinct.end(), x) == distinct.end()) distinct.push_back(x);
    }
    // SelectionWeights inlined: this loop runs s^K times and must not allocate.
    double total = 0;
    for (int32_t x : distinct) total += weight[x];
    for (int32_t x : distinct)
      law[x] += total > 0.0 ? probability * weight[x] / total : probability / static_cast<double>(distinct.size());
    int position = 0;
    while (position < k && ++digits[position] == static_cast<int>(support.size())) digits[position++] = 0;
    if (position == k) break;
  }
  return law;
}

}  // namespace verifiers
}  // namespace speclab
