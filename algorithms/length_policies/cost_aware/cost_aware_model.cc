#include "algorithms/length_policies/cost_aware/cost_aware_model.h"

#include <cmath>

namespace speclab::cost_aware {

double ExpectedTokens(double alpha, int gamma) {
  if (alpha >= 1.0) return gamma + 1.0;
  return (1.0 - std::pow(alpha, gamma + 1)) / (1.0 - alpha);
}

double TokensPerMs(const LatencyProfile& profile, double alpha, int gamma) {
  return ExpectedTokens(alpha, gamma) / (gamma * profile.draft_ms + profile.TargetMs(gamma + 1));
}

int BestLength(const LatencyProfile& profile, double alpha, int max) {
  int best = 1;
  for (int gamma = 2; gamma <= max; ++gamma)
    if (TokensPerMs(profile, alpha, gamma) > TokensPerMs(profile, alpha, best)) best = gamma;
  return best;
}

}  // namespace speclab::cost_aware
