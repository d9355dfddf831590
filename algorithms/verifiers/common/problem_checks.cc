#include "algorithms/verifiers/common/problem_checks.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace speclab {
namespace verifiers {
namespace {

constexpr double kSharedRowTolerance = 1e-7;

}  // namespace

const char* DraftSamplingName(DraftSampling sampling) {
  switch (sampling) {
    case DraftSampling::kDeterministic:
      return "deterministic";
    case DraftSampling::kIndependent:
      return "independent";
    case DraftSampling::kWithoutReplacement:
      return "without_replacement";
  }
  return "unknown";
}

absl::Status CheckTreeAndArgmax(const VerificationProblem& problem, const std::string& verifier) {
  if (problem.tree == nullptr) return absl::InvalidArgumentError(absl::StrCat(verifier, ": no tree"));
  const int n = problem.tree->size();
  if (static_cast<int>(problem.target_argmax.size()) != n)
    return absl::InvalidArgumentError(absl::StrCat(verifier, ": target_argmax has ", problem.target_argmax.size(),
                                                   " entries for ", n, " tree nodes"));
  for (int i = 1; i < n; ++i) {
    if (problem.tree->token(i) < 0)
      return absl::InvalidArgumentError(
          absl::StrCat(verifier, ": node ", i, " has no host token (", problem.tree->token(i), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckTargetRows(const VerificationProblem& problem, const std::string& verifier) {
  if (auto status = CheckTreeAndArgmax(problem, verifier); !status.ok()) return status;
  const int n = problem.tree->size();
  if (problem.target.rows() != n)
    return absl::InvalidArgumentError(
        absl::StrCat(verifier, ": needs one target row per node (", problem.target.rows(), " rows, ", n, " nodes)"));
  for (int i = 1; i < n; ++i) {
    if (problem.tree->token(i) >= problem.target.vocab())
      return absl::InvalidArgumentError(
          absl::StrCat(verifier, ": node ", i, " token ", problem.tree->token(i), " outside the vocabulary"));
  }
  return absl::OkStatus();
}

absl::Status CheckDraftRows(const VerificationProblem& problem, const std::string& verifier,
                            std::initializer_list<DraftSampling> allowed) {
  if (std::find(allowed.begin(), allowed.end(), problem.sampling) == allowed.end()) {
    std::vector<std::string> names;
    for (DraftSampling mode : allowed) names.push_back(DraftSamplingName(mode));
    return absl::InvalidArgumentError(absl::StrCat(
        verifier, ": exact only for drafts sampled as {", absl::StrJoin(names, ", "), "}, got ",
        DraftSamplingName(problem.sampling), " (tokens not drawn from q need a q-free rule such as point_mass, §0)"));
  }
  const int n = problem.tree->size();
  if (problem.draft.rows() != n || problem.draft.vocab() != problem.target.vocab())
    return absl::InvalidArgumentError(absl::StrCat(verifier, ": needs the draft distribution q of every node (",
                                                   problem.draft.rows(), "x", problem.draft.vocab(), " draft rows for ",
                                                   n, " nodes of vocabulary ", problem.target.vocab(), ")"));
  return absl::OkStatus();
}

absl::Status CheckChain(const VerificationProblem& problem, const std::string& verifier) {
  if (!problem.tree->IsChain())
    return absl::InvalidArgumentError(absl::StrCat(verifier, ": works on chains only, got a branching tree"));
  return absl::OkStatus();
}

bool SameDraftRow(absl::Span<const double> a, absl::Span<const double> b) {
  if (a.size() != b.size()) return false;
  for (size_t x = 0; x < a.size(); ++x)
    if (std::abs(a[x] - b[x]) > kSharedRowTolerance) return false;
  return true;
}

absl::StatusOr<absl::Span<const double>> SharedSiblingRow(const VerificationProblem& problem, int parent,
                                                          const std::string& verifier) {
  const std::vector<int>& children = problem.tree->children(parent);
  if (children.empty()) return absl::InternalError(absl::StrCat(verifier, ": node ", parent, " has no children"));
  absl::Span<const double> shared = problem.draft.row(children.front());
  for (size_t j = 1; j < children.size(); ++j) {
    absl::Span<const double> row = problem.draft.row(children[j]);
    for (size_t x = 0; x < row.size(); ++x) {
      if (std::abs(row[x] - shared[x]) > kSharedRowTolerance)
        return absl::InvalidArgumentError(
            absl::StrCat(verifier, ": the children of node ", parent,
                         " carry different q rows; this rule needs siblings drawn from one shared q row "
                         "(use specinfer for one q per child)"));
    }
  }
  return shared;
}

}  // namespace verifiers
}  // namespace speclab
