// Top-down walk shared by the rules that decide one node at a time.
//
// Point-mass (§1.4), SpecInfer/RRS (§1.5, §1.6), chain SpS (§1.2) and the
// canonical two-step scheme (§1.8) all work the same way: at the current node
// either accept one child and descend, or stop and draw the extra token from
// a residual row. At a leaf the extra token is the bonus, drawn from the
// node's own target row.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_WALK_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_WALK_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/core/random_source.h"
#include "framework/core/verifier.h"

namespace speclab {
namespace verifiers {

struct NodeOutcome {
  int accepted_child = -1;       // a child node index, or -1: stop here
  std::vector<double> residual;  // when stopping: the law of the extra token (unnormalised is fine)
};

// Decides one node that has at least one child.
using NodeRule = std::function<absl::StatusOr<NodeOutcome>(int node)>;

absl::StatusOr<Verdict> WalkTree(const VerificationProblem& problem, RandomSource& random, const NodeRule& rule);

// A token drawn from `weights` (need not be normalised); refuses rows without mass.
absl::StatusOr<int32_t> DrawToken(absl::Span<const double> weights, RandomSource& random);

// Accepted root-to-`node` path (root excluded) and the extra token.
Verdict MakeVerdict(const TokenTree& tree, int node, int32_t extra_token);

}  // namespace verifiers
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_WALK_H_
