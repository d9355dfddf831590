// RandomSource: the only way verifiers and policies draw randomness.
//
// Verifiers express every random decision as one of two choice points, so
// that tests can replace the source with an exact enumerator that branches
// on each outcome with its probability (tests/exact_enumeration.h).
#ifndef SPECLAB_FRAMEWORK_CORE_RANDOM_SOURCE_H_
#define SPECLAB_FRAMEWORK_CORE_RANDOM_SOURCE_H_

#include <cstdint>
#include <random>

#include "absl/types/span.h"

namespace speclab {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // True with probability `probability` (clamped to [0, 1]).
  virtual bool Bernoulli(double probability) = 0;
  // An index i drawn with probability weights[i] / sum(weights).
  // Weights are non-negative with a positive sum.
  virtual int Categorical(absl::Span<const double> weights) = 0;
};

// A seeded Mersenne-Twister source: same seed, same draws.
class SeededRandomSource final : public RandomSource {
 public:
  explicit SeededRandomSource(uint64_t seed) : engine_(seed) {}
  bool Bernoulli(double probability) override;
  int Categorical(absl::Span<const double> weights) override;
  double Uniform();  // in [0, 1)

 private:
  std::mt19937_64 engine_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_RANDOM_SOURCE_H_
