// `entropy`'s options, shared by its host rule and its device form.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_ENTROPY_ENTROPY_OPTIONS_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_ENTROPY_ENTROPY_OPTIONS_H_

#include <cmath>

#include "absl/status/statusor.h"
#include "framework/core/options.h"

namespace speclab::entropy {

struct EntropyOptions {
  double gamma_e = 0.2;    // γ_e, the bound's scale: the estimate is 1 - sqrt(γ_e H)
  double threshold = 0.4;  // λ: stop once the estimate is below it
  int max = 8;             // never more drafts a step
};

// `gamma_e` > 0, `threshold` in [0, 1], `max` in [1, 64]; errors name the key.
absl::StatusOr<EntropyOptions> ReadEntropyOptions(Options& options);

// AdaEDL's estimate of the drafted token's acceptance, 1 - sqrt(γ_e H),
// fallen below λ: the rule both forms apply (the device form in the same
// float64 operations).
inline bool StopsAt(const EntropyOptions& o, double entropy) {
  return 1.0 - std::sqrt(o.gamma_e * entropy) < o.threshold;
}

}  // namespace speclab::entropy

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_ENTROPY_ENTROPY_OPTIONS_H_
