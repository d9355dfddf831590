#include "algorithms/verifiers/typical/typical_options.h"

#include "framework/core/status_macros.h"

namespace speclab::typical {

absl::StatusOr<TypicalOptions> ReadTypicalOptions(Options& options) {
  TypicalOptions o;
  ASSIGN_OR_RETURN(o.threshold, options.GetDouble("posterior_threshold", o.threshold));
  ASSIGN_OR_RETURN(o.alpha, options.GetDouble("posterior_alpha", o.alpha));
  if (!(o.threshold > 0.0 && o.threshold <= 1.0)) return options.Error("posterior_threshold", "expected ε in (0, 1]");
  if (!(o.alpha > 0.0)) return options.Error("posterior_alpha", "expected δ > 0");
  return o;
}

}  // namespace speclab::typical
