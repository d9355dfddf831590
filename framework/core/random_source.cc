#include "framework/core/random_source.h"

namespace speclab {

double SeededRandomSource::Uniform() {
  // 53 random bits -> a double in [0, 1).
  return static_cast<double>(engine_() >> 11) * (1.0 / 9007199254740992.0);
}

bool SeededRandomSource::Bernoulli(double probability) {
  if (probability >= 1.0) return true;
  if (probability <= 0.0) return false;
  return Uniform() < probability;
}

int SeededRandomSource::Categorical(absl::Span<const double> weights) {
  double total = 0;
  for (double w : weights) total += w;
  double target = Uniform() * total;
  int last_positive = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    last_positive = static_cast<int>(i);
    if (target < weights[i]) return last_positive;
    target -= weights[i];
  }
  return last_positive;  // rounding fell off the end: the last positive weight
}

}  // namespace speclab
