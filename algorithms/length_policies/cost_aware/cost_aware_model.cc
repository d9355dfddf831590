#include "algorithms/length_policies/cost_aware/cost_aware_model.h"

#include "framework/core/speculation_theory.h"

namespace speclab::cost_aware {

double ExpectedTokens(double alpha, int gamma) { return theory::ChainExpectedTokens(alpha, gamma); }

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
