// `predicted_acceptance`'s options, shared by its host rule and its device form.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_PREDICTED_ACCEPTANCE_PREDICTED_ACCEPTANCE_OPTIONS_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_PREDICTED_ACCEPTANCE_PREDICTED_ACCEPTANCE_OPTIONS_H_

#include "absl/status/statusor.h"
#include "algorithms/length_policies/common/acceptance_head.h"
#include "framework/core/options.h"

namespace speclab::predicted_acceptance {

struct PredictedAcceptanceOptions {
  acceptance_head::AcceptanceHead head;  // `head`: a hidden (or log_probs) head file
  double threshold = 0.7;                // h: stop once P(a rejection so far) exceeds it
  int max = 8;                           // never more drafts a step
};

// `head` a hidden or log_probs acceptance head, `threshold` in [0, 1], `max` in [1, 64];
// errors name the key.
absl::StatusOr<PredictedAcceptanceOptions> ReadPredictedAcceptanceOptions(Options& options);

// SpecDec++'s stop after a draft whose predicted acceptances so far multiply
// to `survival`: 1 - survival > h. Both forms apply it (the device form to
// the same float64 products).
inline bool StopsAt(const PredictedAcceptanceOptions& o, double survival) { return 1.0 - survival > o.threshold; }

}  // namespace speclab::predicted_acceptance

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_PREDICTED_ACCEPTANCE_PREDICTED_ACCEPTANCE_OPTIONS_H_
