// `confidence`'s options, shared by its host rule and its device form.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_CONFIDENCE_CONFIDENCE_OPTIONS_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_CONFIDENCE_CONFIDENCE_OPTIONS_H_

#include "absl/status/statusor.h"
#include "framework/core/options.h"

namespace speclab::confidence {

struct ConfidenceOptions {
  double threshold = 0.4;  // stop once the drafter's top probability is below it
  int max = 8;             // never more drafts a step
};

// `threshold` in [0, 1] and `max` in [1, 64]; errors name the key.
absl::StatusOr<ConfidenceOptions> ReadConfidenceOptions(Options& options);

// The drafter still sure enough of itself to draft on: the rule both forms
// apply (the device form through its first float, FirstFloatWhere, as `top <
// bound` stops). Written as "not below the threshold" so that a NaN top
// probability (NaN logits) goes on in both forms alike, where "top >=
// threshold" would stop on the host and go on on the device.
inline bool GoesOn(const ConfidenceOptions& o, double top_probability) { return !(top_probability < o.threshold); }

}  // namespace speclab::confidence

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_CONFIDENCE_CONFIDENCE_OPTIONS_H_
