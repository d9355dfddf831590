#include "algorithms/verifiers/common/tree_walk.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "algorithms/verifiers/common/distribution.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace verifiers {

absl::StatusOr<int32_t> DrawToken(absl::Span<const double> weights, RandomSource& random) {
  if (!(Sum(weights) > 0.0))
    return absl::InvalidArgumentError("cannot draw the extra token: its distribution has no mass");
  return static_cast<int32_t>(random.Categorical(weights));
}

Verdict MakeVerdict(const TokenTree& tree, int node, int32_t extra_token) {
  Verdict verdict;
  std::vector<int> path = tree.PathTo(node);
  verdict.accepted.assign(path.begin() + 1, path.end());
  verdict.extra_token = extra_token;
  return verdict;
}

absl::StatusOr<Verdict> WalkTree(const VerificationProblem& problem, RandomSource& random, const NodeRule& rule) {
  const TokenTree& tree = *problem.tree;
  Verdict verdict;
  int node = 0;
  while (true) {
    const std::vector<int>& children = tree.children(node);
    if (children.empty()) {
      ASSIGN_OR_RETURN(verdict.extra_token, DrawToken(problem.target.row(node), random));
      return verdict;
    }
    ASSIGN_OR_RETURN(NodeOutcome outcome, rule(node));
    if (outcome.accepted_child < 0) {
      ASSIGN_OR_RETURN(verdict.extra_token, DrawToken(outcome.residual, random));
      return verdict;
    }
    if (std::find(children.begin(), children.end(), outcome.accepted_child) == children.end())
      return absl::InternalError(
          absl::StrCat("node rule accepted ", outcome.accepted_child, ", not a child of ", node));
    verdict.accepted.push_back(outcome.accepted_child);
    node = outcome.accepted_child;
  }
}

}  // namespace verifiers
}  // namespace speclab
