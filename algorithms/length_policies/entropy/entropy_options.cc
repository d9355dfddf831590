#include "algorithms/length_policies/entropy/entropy_options.h"

#include "framework/core/status_macros.h"

namespace speclab::entropy {

absl::StatusOr<EntropyOptions> ReadEntropyOptions(Options& options) {
  EntropyOptions o;
  ASSIGN_OR_RETURN(o.gamma_e, options.GetDouble("gamma_e", o.gamma_e));
  ASSIGN_OR_RETURN(o.threshold, options.GetDouble("threshold", o.threshold));
  ASSIGN_OR_RETURN(int64_t max, options.GetInt("max", o.max));
  if (!(o.gamma_e > 0) || !std::isfinite(o.gamma_e)) return options.Error("gamma_e", "expected a finite number > 0");
  if (!(o.threshold >= 0 && o.threshold <= 1)) return options.Error("threshold", "expected a number in [0, 1]");
  if (max < 1 || max > 64) return options.Error("max", "expected an integer in [1, 64]");
  o.max = static_cast<int>(max);
  return o;
}

}  // namespace speclab::entropy
