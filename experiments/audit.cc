#include "experiments/audit.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "algorithms/verifiers/testing/draft_instance.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

using enumeration::DraftMode;
using enumeration::Instance;

constexpr int kSamples = 20000;
constexpr double kDelta = 1e-6;
constexpr double kLosslessTolerance = enumeration::LosslessTolerance();  // rounding alone

absl::StatusOr<std::unique_ptr<Verifier>> CreateWithDefaults(const VerifierRegistry::Entry& entry) {
  ASSIGN_OR_RETURN(Options options, Options::FromString("", absl::StrCat("<audit:", entry.name, ">")));
  ASSIGN_OR_RETURN(std::unique_ptr<Verifier> verifier, entry.create(options));
  RETURN_IF_ERROR(options.CheckAllUsed());
  return verifier;
}

Instance MakeAuditInstance(std::vector<int> branching, DraftMode mode, bool greedy_target, uint64_t seed) {
  Instance instance;
  // Small vocabularies keep the V^(depth+1) outcome cells few, so N samples resolve them.
  const int vocab = branching.size() >= 3 || branching == std::vector<int>{2, 2} ? 3 : 4;
  instance.branching = std::move(branching);
  instance.mode = mode;
  instance.target = {.vocab = vocab, .seed = seed, .one_hot = greedy_target};
  instance.draft = {.vocab = vocab, .seed = seed ^ 0x5bd1e995u};
  return instance;
}

// The draft modes, among those the audit can produce, that the verifier accepts.
std::vector<DraftMode> AcceptedModes(const Verifier& verifier, const std::vector<int>& probe_shape) {
  if (!verifier.traits().needs_draft_distributions) return {DraftMode::kTopK};
  std::vector<DraftMode> accepted;
  for (DraftMode mode : {DraftMode::kIndependent, DraftMode::kWithoutReplacement, DraftMode::kPerChildIndependent}) {
    // Per-child rows only when nothing else is accepted: they add no coverage otherwise.
    if (mode == DraftMode::kPerChildIndependent && !accepted.empty()) break;
    const Instance probe = MakeAuditInstance(probe_shape, mode, false, 1);
    enumeration::InstanceModels models(probe);
    SeededRandomSource random(1);
    auto drafted = enumeration::DraftTree(probe, models.draft, random);
    if (!drafted.ok()) continue;
    const VerificationProblem problem = enumeration::MakeProblem(probe, models.target, *drafted);
    if (verifier.Verify(problem, random).ok()) accepted.push_back(mode);
  }
  return accepted;
}

std::vector<Instance> AuditInstances(const Verifier& verifier, uint64_t seed, std::string& note) {
  const VerifierTraits traits = verifier.traits();
  const std::vector<std::vector<int>> shapes = traits.chain_only
                                                   ? std::vector<std::vector<int>>{{1, 1}, {1, 1, 1}}
                                                   : std::vector<std::vector<int>>{{2, 1}, {1, 2}, {2, 2}};
  const bool greedy_target = !traits.needs_target_rows;
  std::vector<Instance> instances;
  uint64_t instance_seed = seed * 1000003u;
  for (DraftMode mode : AcceptedModes(verifier, shapes.front())) {
    absl::StrAppend(&note, note.empty() ? "" : ", ", enumeration::DraftModeName(mode));
    for (const std::vector<int>& shape : shapes)
      instances.push_back(MakeAuditInstance(shape, mode, greedy_target, ++instance_seed));
  }
  absl::StrAppend(&note, traits.chain_only ? " chains" : " trees");
  if (greedy_target) absl::StrAppend(&note, ", T=0 (reads only the argmax)");
  return instances;
}

// Fills exact_tv, sampled_tv and bound; returns whether every sampled_tv <= its bound.
absl::StatusOr<bool> Measure(const Verifier& verifier, const std::vector<Instance>& instances, uint64_t seed,
                             AuditRow& row) {
  bool within_bounds = true;
  double worst_ratio = -1;
  for (size_t i = 0; i < instances.size(); ++i) {
    ASSIGN_OR_RETURN(enumeration::LawComparison exact, enumeration::CheckExactly(verifier, instances[i]));
    row.exact_tv = std::max(row.exact_tv, exact.tv);
    ASSIGN_OR_RETURN(enumeration::SampledComparison sampled,
                     enumeration::SampleAgainstTarget(verifier, instances[i], kSamples, seed + i, kDelta));
    within_bounds = within_bounds && sampled.tv <= sampled.bound;
    if (sampled.tv / sampled.bound > worst_ratio) {
      worst_ratio = sampled.tv / sampled.bound;
      row.sampled_tv = sampled.tv;
      row.bound = sampled.bound;
    }
  }
  return within_bounds;
}

AuditRow AuditOne(const VerifierRegistry::Entry& entry, uint64_t seed) {
  AuditRow row{.verifier = entry.name,
               .claimed_lossless = false,
               .exact_tv = 0,
               .sampled_tv = 0,
               .bound = 0,
               .pass = false,
               .note = ""};
  auto verifier = CreateWithDefaults(entry);
  if (!verifier.ok()) {
    row.note = absl::StrCat("cannot create with default options: ", verifier.status().message());
    return row;
  }
  row.claimed_lossless = (*verifier)->traits().losslessness == Losslessness::kLossless;
  std::string coverage;
  const std::vector<Instance> instances = AuditInstances(**verifier, seed, coverage);
  if (instances.empty()) {
    row.note = "accepts none of the draft modes the audit can produce";
    return row;
  }
  auto within_bounds = Measure(**verifier, instances, seed, row);
  if (!within_bounds.ok()) {
    row.note = absl::StrCat("verification failed: ", within_bounds.status().message());
    return row;
  }
  const bool registry_agrees = entry.lossless == (row.claimed_lossless ? "lossless" : "lossy");
  row.note = absl::StrFormat("%d instances: %s", instances.size(), coverage);
  if (!registry_agrees) absl::StrAppend(&row.note, "; registry says '", entry.lossless, "' but traits disagree");
  if (row.claimed_lossless) {
    row.pass = registry_agrees && row.exact_tv < kLosslessTolerance && *within_bounds;
  } else {
    row.pass = registry_agrees;
    absl::StrAppendFormat(&row.note, "; declared lossy, measured exact TV %.3g", row.exact_tv);
  }
  return row;
}

}  // namespace

absl::StatusOr<std::vector<AuditRow>> AuditAllVerifiers(uint64_t seed) {
  std::vector<AuditRow> rows;
  for (const VerifierRegistry::Entry* entry : VerifierRegistry::List()) rows.push_back(AuditOne(*entry, seed));
  if (rows.empty()) return absl::FailedPreconditionError("no verifier is registered (plugins not linked?)");
  return rows;
}

}  // namespace speclab
