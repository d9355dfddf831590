// LatencyProfile: measured step costs, shared by the plugins that weigh
// tokens against time (the `sequoia` builder, the `cost_aware` policy).
//
// `speclab measure-acceptance` writes one (experiments/measure_acceptance.h)
// under the `latency_profile` key of its YAML output:
//   latency_profile: {budgets: [1, 2, 4, ...], target_ms: [...], draft_ms: x}
// the target's forward time over n tokens for each n of `budgets`, and one
// drafter forward (one tree level, or one chain token).
#ifndef SPECLAB_FRAMEWORK_CORE_LATENCY_PROFILE_H_
#define SPECLAB_FRAMEWORK_CORE_LATENCY_PROFILE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/core/options.h"

namespace speclab {

struct LatencyProfile {
  std::vector<int> budgets;       // token counts n of a target forward, increasing
  std::vector<double> target_ms;  // t_target(n) for each budget, non-decreasing once read
  double draft_ms = 0;            // t_draft

  // t_target(n) for any n >= 1: linear between the measured counts, the first
  // below them, and the last two's slope above them.
  double TargetMs(int n) const;
};

// `latency_profile` (a mapping) or `latency_profile_file` (a YAML file whose
// `latency_profile` key holds one) from a plugin's options, checked: one
// time per budget, budgets increasing in [1, 4096], times positive. Errors
// name the file and the key. A target forward over more tokens never costs
// less, so a measured time below an earlier one is noise: target_ms holds
// NonDecreasingFit() of the times given, which would otherwise make a
// planner (cost_aware, sequoia, opt_tree) prefer a longer draft for a dip.
absl::StatusOr<LatencyProfile> ReadLatencyProfile(Options& options);

// The least-squares non-decreasing fit of `values` (pool adjacent
// violators: each run that falls is replaced by its mean): `values` itself
// where it never falls.
std::vector<double> NonDecreasingFit(const std::vector<double>& values);

// The Options holding `key`: the plugin's own where it gives `key` inline,
// else the YAML file that `file_key` names (which must hold `key`). Refuses
// both at once, and neither where `required`.
absl::StatusOr<Options> InlineOrFile(Options& options, const std::string& key, const std::string& file_key,
                                     bool required);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_LATENCY_PROFILE_H_
