#include "algorithms/length_policies/predicted_acceptance/predicted_acceptance_options.h"

#include "framework/core/status_macros.h"

namespace speclab::predicted_acceptance {

absl::StatusOr<PredictedAcceptanceOptions> ReadPredictedAcceptanceOptions(Options& options) {
  PredictedAcceptanceOptions o;
  ASSIGN_OR_RETURN(o.threshold, options.GetDouble("threshold", o.threshold));
  ASSIGN_OR_RETURN(int64_t max, options.GetInt("max", o.max));
  if (!(o.threshold >= 0 && o.threshold <= 1)) return options.Error("threshold", "expected a probability in [0, 1]");
  if (max < 1 || max > 64) return options.Error("max", "expected an integer in [1, 64]");
  o.max = static_cast<int>(max);
  ASSIGN_OR_RETURN(o.head, acceptance_head::ReadHeadOption(
                                  options, {acceptance_head::Features::kHidden, acceptance_head::Features::kLogProbs}));
  return o;
}

}  // namespace speclab::predicted_acceptance
