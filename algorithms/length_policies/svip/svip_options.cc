#include "algorithms/length_policies/svip/svip_options.h"

#include "framework/core/status_macros.h"

namespace speclab::svip {

absl::StatusOr<SvipOptions> ReadSvipOptions(Options& options) {
  SvipOptions o;
  ASSIGN_OR_RETURN(o.gamma, options.GetDouble("gamma", o.gamma));
  ASSIGN_OR_RETURN(o.threshold, options.GetDouble("threshold", o.threshold));
  ASSIGN_OR_RETURN(int64_t max, options.GetInt("max", o.max));
  if (!(o.gamma > 0) || !std::isfinite(o.gamma)) return options.Error("gamma", "expected a finite number > 0");
  if (!(o.threshold >= 0) || !std::isfinite(o.threshold))
    return options.Error("threshold", "expected a finite number >= 0");
  if (max < 1 || max > 64) return options.Error("max", "expected an integer in [1, 64]");
  o.max = static_cast<int>(max);
  return o;
}

}  // namespace speclab::svip
