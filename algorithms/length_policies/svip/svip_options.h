// `svip`'s options, shared by its host rule and its device form.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_SVIP_SVIP_OPTIONS_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_SVIP_SVIP_OPTIONS_H_

#include <cmath>

#include "absl/status/statusor.h"
#include "framework/core/options.h"

namespace speclab::svip {

// The defaults are the authors' code's: the entropy scale 0.15, the
// threshold 0.3, at most 40 drafts.
struct SvipOptions {
  double gamma = 0.15;     // the entropy's scale under the square root
  double threshold = 0.3;  // h: stop once sqrt(gamma H) exceeds it
  int max = 40;            // never more drafts a step
};

// `gamma` > 0, `threshold` >= 0, `max` in [1, 64]; errors name the key.
absl::StatusOr<SvipOptions> ReadSvipOptions(Options& options);

// SVIP's stop after a draft whose drafter distribution had entropy H (nats):
// sqrt(gamma H) > h, the rule both forms apply (the device form in the same
// float64 operations).
inline bool StopsAt(const SvipOptions& o, double entropy) { return std::sqrt(o.gamma * entropy) > o.threshold; }

}  // namespace speclab::svip

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_SVIP_SVIP_OPTIONS_H_
