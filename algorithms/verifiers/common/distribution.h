// Small operations on probability rows shared by the verifiers (§0 notation).
//
// Verifiers work on host rows of doubles. Every helper here is total: the
// 0/0 cases that a rule only meets on zero-probability events (or through
// rounding) get a documented, safe answer instead of a NaN.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_DISTRIBUTION_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_DISTRIBUTION_H_

#include <vector>

#include "absl/types/span.h"

namespace speclab {
namespace verifiers {

double Sum(absl::Span<const double> v);

// (scale * p - q)+ elementwise.
std::vector<double> PositivePart(absl::Span<const double> p, absl::Span<const double> q, double scale = 1.0);

// min(1, numerator / denominator). A non-positive denominator means the token
// could not have been drawn (q(x) = 0), which every rule treats as a reject
// (§1.2, vLLM); a non-positive numerator is a reject too.
double AcceptProbability(double numerator, double denominator);

// Replaces `dist` by candidate / sum(candidate) when that sum is positive and
// returns true; otherwise leaves `dist` untouched and returns false. Lossless
// rules only produce an all-zero residual on events of probability zero (a
// reject that could only happen through rounding), where keeping the previous
// row is as good as any answer and keeps RandomSource::Categorical's contract.
bool ReplaceWithNormalized(std::vector<double>& dist, const std::vector<double>& candidate);

// Divides `dist` by its sum; false (and `dist` untouched) if the sum is not positive.
bool NormalizeInPlace(std::vector<double>& dist);

// `q` with the listed tokens zeroed and renormalised: the law of the next
// draw without replacement (§1.6). All zeros if no mass is left.
std::vector<double> MaskedRow(absl::Span<const double> q, absl::Span<const int> removed_tokens);

}  // namespace verifiers
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_DISTRIBUTION_H_
