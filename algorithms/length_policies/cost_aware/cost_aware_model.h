// The throughput model `cost_aware` maximises (Leviathan et al.'s i.i.d.
// acceptance model, docs/algorithms.md §3.10), for the policy and its tests.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_COST_AWARE_COST_AWARE_MODEL_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_COST_AWARE_COST_AWARE_MODEL_H_

#include "framework/core/latency_profile.h"

namespace speclab::cost_aware {

// Expected tokens a step emits with γ drafts, each accepted with probability
// α until the first rejection, plus the extra token: (1 - α^(γ+1)) / (1 - α)
// (γ + 1 at α = 1).
double ExpectedTokens(double alpha, int gamma);

// Expected tokens per millisecond: ExpectedTokens / (γ t_draft + t_target(γ + 1)).
double TokensPerMs(const LatencyProfile& profile, double alpha, int gamma);

// The γ in [1, max] with the most tokens per millisecond (the smallest on ties).
int BestLength(const LatencyProfile& profile, double alpha, int max);

}  // namespace speclab::cost_aware

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_COST_AWARE_COST_AWARE_MODEL_H_
