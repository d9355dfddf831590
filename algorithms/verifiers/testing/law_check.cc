#include "algorithms/verifiers/testing/law_check.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "algorithms/verifiers/testing/choice_enumerator.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace enumeration {
namespace {

// Index of a length-`horizon` sequence in base `vocab`.
size_t SequenceIndex(const std::vector<int32_t>& s, int vocab) {
  size_t index = 0;
  for (int32_t token : s) index = index * vocab + static_cast<size_t>(token);
  return index;
}

// Adds mass · P_target(completion | prefix) to every completion of `prefix` to `horizon` tokens.
void SpreadWithTarget(const TableModel& target, int32_t root, int horizon, std::vector<int32_t>& prefix, double mass,
                      std::vector<double>& out) {
  if (static_cast<int>(prefix.size()) == horizon) {
    out[SequenceIndex(prefix, target.vocab())] += mass;
    return;
  }
  std::vector<int32_t> context = {root};
  context.insert(context.end(), prefix.begin(), prefix.end());
  const std::vector<double> row = target.Row(context);
  for (int y = 0; y < target.vocab(); ++y) {
    if (row[y] == 0.0) continue;
    prefix.push_back(y);
    SpreadWithTarget(target, root, horizon, prefix, mass * row[y], out);
    prefix.pop_back();
  }
}

std::vector<double> TargetLaw(const TableModel& target, int32_t root, int horizon) {
  std::vector<double> law(static_cast<size_t>(std::pow(target.vocab(), horizon) + 0.5), 0.0);
  std::vector<int32_t> prefix;
  SpreadWithTarget(target, root, horizon, prefix, 1.0, law);
  return law;
}

}  // namespace

absl::Status ForEachDraft(const Instance& instance, const InstanceModels& models,
                          const std::function<absl::Status(const DraftedTree&, double)>& visit) {
  DraftedTree current;
  return EnumerateChoices(
      [&](RandomSource& random) -> absl::Status {
        ASSIGN_OR_RETURN(current, DraftTree(instance, models.draft, random));
        return absl::OkStatus();
      },
      [&](double probability) { return visit(current, probability); });
}

absl::StatusOr<std::vector<std::pair<Verdict, double>>> VerdictLaw(const Verifier& verifier,
                                                                   const VerificationProblem& problem) {
  std::vector<std::pair<Verdict, double>> law;
  Verdict current;
  RETURN_IF_ERROR(EnumerateChoices(
      [&](RandomSource& random) -> absl::Status {
        ASSIGN_OR_RETURN(current, verifier.Verify(problem, random));
        return absl::OkStatus();
      },
      [&](double probability) {
        law.emplace_back(current, probability);
        return absl::OkStatus();
      }));
  return law;
}

absl::StatusOr<std::vector<int32_t>> EmittedTokens(const TokenTree& tree, const Verdict& verdict, int vocab) {
  std::vector<int32_t> tokens;
  int parent = 0;
  for (int node : verdict.accepted) {
    if (node <= 0 || node >= tree.size() || tree.parent(node) != parent)
      return absl::InternalError(absl::StrCat("verdict path is not a root-down path at node ", node));
    tokens.push_back(tree.token(node));
    parent = node;
  }
  if (verdict.extra_token < 0 || verdict.extra_token >= vocab)
    return absl::InternalError(absl::StrCat("extra token ", verdict.extra_token, " outside the vocabulary"));
  tokens.push_back(verdict.extra_token);
  return tokens;
}

absl::StatusOr<SequenceLaw> ExactLaw(const Verifier& verifier, const Instance& instance) {
  InstanceModels models(instance);
  SequenceLaw law;
  auto add_draft = [&](const DraftedTree& drafted, double draft_probability) -> absl::Status {
    const VerificationProblem problem = MakeProblem(instance, models.target, drafted);
    ASSIGN_OR_RETURN(auto verdicts, VerdictLaw(verifier, problem));
    for (const auto& [verdict, probability] : verdicts) {
      ASSIGN_OR_RETURN(std::vector<int32_t> tokens, EmittedTokens(drafted.tree, verdict, instance.vocab()));
      law[tokens] += draft_probability * probability;
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(ForEachDraft(instance, models, add_draft));
  return law;
}

absl::StatusOr<LawComparison> CompareWithTarget(const SequenceLaw& law, const TableModel& target, int32_t root_token,
                                                int horizon) {
  LawComparison out;
  const std::vector<double> expected = TargetLaw(target, root_token, horizon);
  std::vector<double> actual(expected.size(), 0.0);
  for (const auto& [tokens, probability] : law) {
    if (tokens.empty() || static_cast<int>(tokens.size()) > horizon)
      return absl::InternalError(absl::StrCat("emitted ", tokens.size(), " tokens, horizon ", horizon));
    out.total_probability += probability;
    out.expected_accepted += probability * static_cast<double>(tokens.size() - 1);
    std::vector<int32_t> prefix = tokens;
    SpreadWithTarget(target, root_token, horizon, prefix, probability, actual);
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const double diff = std::abs(actual[i] - expected[i]);
    out.max_abs_error = std::max(out.max_abs_error, diff);
    out.tv += 0.5 * diff;
  }
  return out;
}

absl::StatusOr<LawComparison> CheckExactly(const Verifier& verifier, const Instance& instance) {
  ASSIGN_OR_RETURN(SequenceLaw law, ExactLaw(verifier, instance));
  return CompareWithTarget(law, TableModel(instance.target), instance.root_token, instance.depth() + 1);
}

double SampledTvBound(const std::vector<double>& target_law, int samples, double delta) {
  double mean_bound = 0;
  for (double p : target_law) mean_bound += 0.5 * std::sqrt(p * (1.0 - p) / samples);
  return mean_bound + std::sqrt(std::log(1.0 / delta) / (2.0 * samples));
}

absl::StatusOr<SampledComparison> SampleAgainstTarget(const Verifier& verifier, const Instance& instance, int samples,
                                                      uint64_t seed, double delta) {
  InstanceModels models(instance);
  const int horizon = instance.depth() + 1;
  const std::vector<double> expected = TargetLaw(models.target, instance.root_token, horizon);
  std::vector<double> counts(expected.size(), 0.0);
  double accepted = 0;
  SeededRandomSource random(seed);
  for (int i = 0; i < samples; ++i) {
    ASSIGN_OR_RETURN(DraftedTree drafted, DraftTree(instance, models.draft, random));
    const VerificationProblem problem = MakeProblem(instance, models.target, drafted);
    ASSIGN_OR_RETURN(Verdict verdict, verifier.Verify(problem, random));
    accepted += static_cast<double>(verdict.accepted.size());
    ASSIGN_OR_RETURN(std::vector<int32_t> tokens, EmittedTokens(drafted.tree, verdict, instance.vocab()));
    std::vector<int32_t> context = {instance.root_token};
    context.insert(context.end(), tokens.begin(), tokens.end());
    while (static_cast<int>(tokens.size()) < horizon) {
      const int32_t y = random.Categorical(models.target.Row(context));
      tokens.push_back(y);
      context.push_back(y);
    }
    counts[SequenceIndex(tokens, instance.vocab())] += 1.0;
  }
  SampledComparison out;
  out.samples = samples;
  out.cells = static_cast<int>(expected.size());
  out.mean_accepted = accepted / samples;
  for (size_t i = 0; i < expected.size(); ++i) out.tv += 0.5 * std::abs(counts[i] / samples - expected[i]);
  out.bound = SampledTvBound(expected, samples, delta);
  return out;
}

}  // namespace enumeration
}  // namespace speclab
