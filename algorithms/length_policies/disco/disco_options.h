// `disco`'s options, shared by its host rule and its device form.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_DISCO_DISCO_OPTIONS_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_DISCO_DISCO_OPTIONS_H_

#include "absl/status/statusor.h"
#include "algorithms/length_policies/common/acceptance_head.h"
#include "framework/core/options.h"

namespace speclab::disco {

struct DiscoOptions {
  acceptance_head::AcceptanceHead head;  // `head`: a summary_index (or summary) head file
  double threshold = 0.5;                // stop once the classifier's score is below it
  int max = 8;                           // never more drafts a step
};

// `head` a summary_index or summary acceptance head, `threshold` in [0, 1], `max` in [1, 64];
// errors name the key.
absl::StatusOr<DiscoOptions> ReadDiscoOptions(Options& options);

}  // namespace speclab::disco

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_DISCO_DISCO_OPTIONS_H_
