// Losslessness audit of every registered verifier (docs/algorithms.md §0.4).
//
// For each verifier (default options) the audit drafts small random table
// instances of the shapes and sampling modes it accepts and measures
//  - exact_tv: the largest total-variation distance, over the instances,
//    between "one step then plain target sampling" and the target's own law
//    of depth+1 tokens, computed by exact enumeration of every draft and every
//    verifier choice (algorithms/verifiers/testing/);
//  - sampled_tv: the same distance for an empirical law of N = 20000 Monte
//    Carlo steps with SeededRandomSource, with `bound` the threshold a
//    sampler of exactly the target law exceeds with probability <= 1e-6
//    (enumeration::SampledTvBound: ½Σ sqrt(P(1-P)/N) + sqrt(ln(1e6)/(2N))).
//    The row reports the instance with the largest sampled_tv / bound.
// A verifier that claims losslessness passes iff exact_tv is below what float64
// rounding alone can do (enumeration::LosslessTolerance(), 2.2e-8) and every
// instance's sampled_tv <= bound; one declared lossy passes by being
// declared so, and its note gives the measured distance. Verifiers that read
// only the target argmax (traits.needs_target_rows = false) can only preserve
// the greedy law and are audited with one-hot target rows (T = 0).
#ifndef SPECLAB_EXPERIMENTS_AUDIT_H_
#define SPECLAB_EXPERIMENTS_AUDIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab {

struct AuditRow {
  std::string verifier;
  bool claimed_lossless;
  double exact_tv;
  double sampled_tv;
  double bound;
  bool pass;
  std::string note;
};

absl::StatusOr<std::vector<AuditRow>> AuditAllVerifiers(uint64_t seed);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_AUDIT_H_
