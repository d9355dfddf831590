// Test helpers around the exact-enumeration harness (docs/algorithms.md §0.4).
//
// The harness itself (enumerating RandomSource, table models, drafting,
// law comparison) lives in algorithms/verifiers/testing/ so that the
// experiments' audit can use it too; this file adds the instance catalogues
// and gtest assertions the verifier tests share.
#ifndef SPECLAB_TESTS_SUPPORT_EXACT_ENUMERATION_H_
#define SPECLAB_TESTS_SUPPORT_EXACT_ENUMERATION_H_

#include <memory>
#include <string>
#include <vector>

#include "algorithms/verifiers/testing/draft_instance.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "framework/core/verifier.h"

namespace speclab {
namespace enumeration_test {

using enumeration::DraftMode;
using enumeration::Instance;

// Losslessness tolerance: what rounding alone can do to an exact rule's law
// (enumeration::LosslessTolerance, about 2.2e-8).
inline constexpr double kLosslessTolerance = enumeration::LosslessTolerance();
// An error above this marks a rule as lossy: four orders of magnitude above
// rounding, and below the error every lossy rule of the catalogue shows.
inline constexpr double kLossyThreshold = 1e-4;

// Creates a registered verifier from YAML options ("" = defaults); nullptr and
// a test failure if that fails.
std::unique_ptr<Verifier> MakeVerifier(const std::string& name, const std::string& yaml_options = "");

// Creation status, for tests of option validation.
absl::Status CreateStatus(const std::string& name, const std::string& yaml_options);

// Random Dirichlet tables for target and draft (different seeds).
Instance MakeInstance(std::vector<int> branching, int vocab, DraftMode mode, uint64_t seed);

// Shapes of §0.4: chains of depth 1..3 and, unless `chains_only`, the trees
// [2], [3], [2,1], [1,2], [2,2]; two seeds each, a peaked Dirichlet and a
// one-hot target (T = 0) among them. Vocabularies shrink as trees grow so
// the whole catalogue enumerates in well under a second per verifier.
std::vector<Instance> Catalogue(DraftMode mode, bool chains_only);

// Checks every instance exactly; expects error < kLosslessTolerance on each
// and returns the largest error seen (also printed, prefixed with `label`).
double ExpectLossless(const Verifier& verifier, const std::vector<Instance>& instances, const std::string& label);

// Largest exact error over the instances, without expectations.
double MaxLawError(const Verifier& verifier, const std::vector<Instance>& instances);

// With one-hot target rows the verdict must be deterministic and equal to
// greedy exact match's (same accepted nodes, same extra token) on every draft
// tree of the instance. Trees with duplicate sibling tokens are skipped unless
// q is one-hot too (then duplicated subtrees are identical): with differing
// subtrees under duplicates, greedy's longest-path search legitimately accepts
// more than a top-down rule. Returns the number of draft trees compared.
int ExpectGreedyAtTemperatureZero(const Verifier& verifier, const Instance& instance);

// A device rule (DeviceRuleAdapter::ForRule(rule, rule_seed), one per
// instance) sampled `samples` times with `sample_seed` against each
// instance's target law: expects the TV under the proven bound (law_check.h).
void ExpectDeviceRuleLawMatchesTarget(const std::string& rule, const std::vector<Instance>& instances,
                                      uint64_t rule_seed, uint64_t sample_seed, int samples = 20000);

// A negative control for a device rule exact for drafts sampled as
// `declared`: drafts drawn as `drawn` but declared `declared`, on the
// catalogue instance where the host rule errs most so, must fail the Monte
// Carlo check (SampleAgainstTarget) that the rule passes on true drafts.
void ExpectDeviceRuleCatchesMisdeclaredDrafts(const std::string& rule, DraftMode drawn, DraftSampling declared);

// For deterministic rules: the device rule (through the adapter, with the
// greedy flag set and unset) gives the host rule's verdict on every draft
// tree of the catalogue's instances for `modes`, chains and trees. Returns
// the number of trees compared.
int ExpectDeviceVerdictsEqualTheHostRules(const std::string& rule, const std::vector<DraftMode>& modes);

// ExpectGreedyAtTemperatureZero for a device rule, with the greedy flag set
// (the engine's fast path at T = 0) and unset (the general rule on one-hot
// rows); expects at least one draft tree compared each time.
void ExpectDeviceRuleGreedyAtTemperatureZero(const std::string& rule, const Instance& instance);

// Status of verifying one tree drafted (with a seeded source) from the instance;
// for tests of what a verifier refuses.
absl::Status VerifyOnceStatus(const Verifier& verifier, const Instance& instance);

// E[accepted drafts per step], exactly.
double ExpectedAccepted(const Verifier& verifier, const Instance& instance);

// The setting of Khisti et al.'s Figure 2, left panel (§5.5): p = (1/3,
// 1/3, 1/3), q = (1/3, q2, 2/3 - q2), K = 2 i.i.d. drafts, one position. Its
// values below are a computation of that setting made for the catalogue,
// not numbers read from the paper (the figure is a plot).
Instance Figure2Instance(double q2);
struct Figure2Row {
  double q2;
  double optimal;
  double spectr;
  double specinfer;
};
// The catalogue's computed values (§5.5, 4 decimals).
const std::vector<Figure2Row>& Figure2Table();
// A value read from a table of 4 decimals is within half a unit of its last
// place of the exact one.
inline constexpr double kTableRounding = 0.5e-4;

}  // namespace enumeration_test
}  // namespace speclab

#endif  // SPECLAB_TESTS_SUPPORT_EXACT_ENUMERATION_H_
