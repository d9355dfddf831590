// Medusa typical acceptance's constants, shared by its host rule and its
// device form (§1.11). ε and δ default to medusa_generate's values.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TYPICAL_TYPICAL_CONSTANTS_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TYPICAL_TYPICAL_CONSTANTS_H_

namespace speclab::typical {

inline constexpr double kDefaultPosteriorThreshold = 0.09;  // ε
inline constexpr double kDefaultPosteriorAlpha = 0.3;       // δ
inline constexpr double kEntropyEpsilon = 1e-5;             // Medusa's log(p + 1e-5)

}  // namespace speclab::typical

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TYPICAL_TYPICAL_CONSTANTS_H_
