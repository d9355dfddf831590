#include "framework/core/speculation_theory.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace speclab::theory {

double ChainExpectedTokens(double alpha, int gamma) {
  if (alpha >= 1.0) return gamma + 1.0;
  return (1.0 - std::pow(alpha, gamma + 1)) / (1.0 - alpha);
}

double ChainWalltimeImprovement(double alpha, int gamma, double c) {
  return ChainExpectedTokens(alpha, gamma) / (gamma * c + 1.0);
}

int OptimalChainLength(double alpha, double c, int max_gamma) {
  int best = 0;
  double best_value = 1.0;  // autoregressive decoding
  for (int gamma = 1; gamma <= max_gamma; ++gamma) {
    const double value = ChainWalltimeImprovement(alpha, gamma, c);
    if (value > best_value) {
      best = gamma;
      best_value = value;
    }
  }
  return best;
}

double TreeExpectedTokens(const std::vector<std::vector<int64_t>>& choices, const std::vector<double>& acceptance) {
  double total = 1.0;  // the root's extra token
  for (const auto& path : choices) {
    double product = 1.0;
    for (int64_t rank : path)
      product *= rank >= 0 && rank < static_cast<int64_t>(acceptance.size()) ? acceptance[rank] : 0.0;
    total += product;
  }
  return total;
}

absl::StatusOr<double> OptimalMultiDraftAcceptance(const std::vector<double>& p, const std::vector<double>& q,
                                                   int k) {
  if (p.size() != q.size() || p.empty() || p.size() > 24)
    return absl::InvalidArgumentError(absl::StrCat("expected p and q over one vocabulary of 1 to 24 tokens, got ",
                                                   p.size(), " and ", q.size()));
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("expected K >= 1 drafts, got ", k));
  for (size_t i = 0; i < p.size(); ++i)
    if (!(p[i] >= 0) || !(q[i] >= 0)) return absl::InvalidArgumentError("probabilities must be >= 0");
  const size_t n = p.size();
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t subset = 0; subset < (uint32_t{1} << n); ++subset) {
    double p_t = 0, q_t = 0;
    for (size_t i = 0; i < n; ++i) {
      if (subset >> i & 1) {
        p_t += p[i];
        q_t += q[i];
      }
    }
    best = std::min(best, p_t + 1.0 - std::pow(std::min(q_t, 1.0), k));
  }
  return std::clamp(best, 0.0, 1.0);
}

}  // namespace speclab::theory
