// Medusa typical acceptance's options and constants, shared by its host rule
// and its device form (§1.11).
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TYPICAL_TYPICAL_OPTIONS_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TYPICAL_TYPICAL_OPTIONS_H_

#include "absl/status/statusor.h"
#include "framework/core/options.h"

namespace speclab::typical {

inline constexpr double kEntropyEpsilon = 1e-5;  // Medusa's log(p + 1e-5)

struct TypicalOptions {
  double threshold = 0.09;  // ε, `posterior_threshold` (medusa_generate's default)
  double alpha = 0.3;       // δ, `posterior_alpha` (medusa_generate's default)
};

// `posterior_threshold` in (0, 1] and `posterior_alpha` > 0, defaults as above;
// errors name the key.
absl::StatusOr<TypicalOptions> ReadTypicalOptions(Options& options);

}  // namespace speclab::typical

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TYPICAL_TYPICAL_OPTIONS_H_
