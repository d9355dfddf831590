// Exact enumeration of a randomised program's outcomes (docs/algorithms.md §0.4).
//
// Verifiers draw all their randomness through RandomSource::Bernoulli and
// ::Categorical. EnumerateChoices runs a program once per sequence of choice
// outcomes, depth first: a Bernoulli(a) branches into true (probability a) and
// false (1 - a), a Categorical into one branch per positive weight;
// zero-probability branches are skipped. After each complete run it reports
// the run's exact probability (the product of its branch probabilities).
//
// The program is replayed from the start for every run, so it must be a
// deterministic function of its choice outcomes; a replay that asks a
// different question than before is reported as an error.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TESTING_CHOICE_ENUMERATOR_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TESTING_CHOICE_ENUMERATOR_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"

namespace speclab {
class RandomSource;

namespace enumeration {

struct EnumerationLimits {
  int64_t max_runs = 50'000'000;
  int max_choices_per_run = 100'000;
};

// `run` executes the program once with the given source; `record(probability)`
// is called after each successful run. A failing run or record stops the
// enumeration with its status.
absl::Status EnumerateChoices(const std::function<absl::Status(RandomSource&)>& run,
                              const std::function<absl::Status(double probability)>& record,
                              const EnumerationLimits& limits = {});

}  // namespace enumeration
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TESTING_CHOICE_ENUMERATOR_H_
