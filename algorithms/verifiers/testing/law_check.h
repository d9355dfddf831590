// Losslessness checks of a verifier on one Instance (docs/algorithms.md §0.4).
//
// A step emits o = (accepted tokens, extra token). The verifier is lossless iff
// for every sequence s of length depth+1
//   Σ_o P(o) · P_target(s[|o|:] | s[:|o|]) · 1[o prefixes s] = P_target(s),
// i.e. the step followed by plain target sampling has the target's law.
// ExactLaw computes P(o) by enumerating every draft tree and every verifier
// choice; SampleLaw estimates the same comparison by Monte Carlo.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TESTING_LAW_CHECK_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TESTING_LAW_CHECK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/verifiers/testing/choice_enumerator.h"
#include "algorithms/verifiers/testing/draft_instance.h"
#include "algorithms/verifiers/testing/table_model.h"
#include "framework/core/float_bounds.h"
#include "framework/core/verifier.h"

namespace speclab {
namespace enumeration {

// Operations a rule spends computing one choice's probability, at most: a
// residual renormalised over an instance's vocabulary (a few dozen tokens) a
// few times.
inline constexpr int64_t kRoundingsPerChoice = 1000;

// How far rounding alone (float64) can move an exact rule's enumerated law:
// a sequence's probability sums non-negative terms of total at most 1 over at
// most EnumerationLimits::max_runs draft trees and as many verifier runs per
// tree (gamma(max_runs) each), and each term is a product of at most
// max_choices_per_run choice probabilities of kRoundingsPerChoice operations.
inline constexpr double LosslessTolerance() {
  constexpr EnumerationLimits kLimits;
  return 2 * float_bounds::Gamma(kLimits.max_runs, float_bounds::kFloat64Roundoff) +
         float_bounds::Gamma(kLimits.max_choices_per_run * kRoundingsPerChoice, float_bounds::kFloat64Roundoff);
}

// Emitted token sequence -> probability.
using SequenceLaw = std::map<std::vector<int32_t>, double>;

// The instance's two table models.
struct InstanceModels {
  explicit InstanceModels(const Instance& instance) : target(instance.target), draft(instance.draft) {}
  TableModel target;
  TableModel draft;
};

// Calls `visit(drafted, probability)` for every draft tree of positive probability.
absl::Status ForEachDraft(const Instance& instance, const InstanceModels& models,
                          const std::function<absl::Status(const DraftedTree&, double)>& visit);

// Every verdict of `verifier` on `problem` with its exact probability
// (verdicts reached by several choice sequences are listed once each time).
absl::StatusOr<std::vector<std::pair<Verdict, double>>> VerdictLaw(const Verifier& verifier,
                                                                   const VerificationProblem& problem);

// The tokens a verdict emits; fails if it is not a root-down path plus an in-vocabulary token.
absl::StatusOr<std::vector<int32_t>> EmittedTokens(const TokenTree& tree, const Verdict& verdict, int vocab);

struct LawComparison {
  double max_abs_error = 0;  // max_s |lhs(s) - P_target(s)|
  double tv = 0;             // ½ Σ_s |lhs(s) - P_target(s)|
  double total_probability = 0;
  double expected_accepted = 0;  // E[accepted drafts per step]
};

// Exact law of the emitted tokens over drafting and verification.
absl::StatusOr<SequenceLaw> ExactLaw(const Verifier& verifier, const Instance& instance);

// Compares a law of emitted prefixes (each at most `horizon` long) with the target.
absl::StatusOr<LawComparison> CompareWithTarget(const SequenceLaw& law, const TableModel& target, int32_t root_token,
                                                int horizon);

// ExactLaw + CompareWithTarget with horizon depth+1.
absl::StatusOr<LawComparison> CheckExactly(const Verifier& verifier, const Instance& instance);

struct SampledComparison {
  double tv = 0;     // ½ Σ_s |empirical(s) - P_target(s)| over the V^(depth+1) sequences
  double bound = 0;  // see SampledTvBound
  int samples = 0;
  int cells = 0;
  double mean_accepted = 0;  // accepted drafts per step, averaged over the samples
};

// ½ Σ_s sqrt(P(s)(1-P(s))/N) + sqrt(ln(1/δ)/(2N)). The first term bounds
// E[TV] of an N-sample empirical law (Jensen: E|p̂-p| <= sd(p̂)); the second is
// McDiarmid's deviation for a statistic with bounded differences 1/N. So a
// sampler with exactly the target law exceeds the bound with probability <= δ.
double SampledTvBound(const std::vector<double>& target_law, int samples, double delta);

// N runs with SeededRandomSource(seed): draft, verify, then continue with plain
// target sampling to depth+1 tokens; compares the empirical law with the target.
absl::StatusOr<SampledComparison> SampleAgainstTarget(const Verifier& verifier, const Instance& instance, int samples,
                                                      uint64_t seed, double delta = 1e-6);

}  // namespace enumeration
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TESTING_LAW_CHECK_H_
