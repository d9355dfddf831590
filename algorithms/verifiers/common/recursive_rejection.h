// Recursive rejection over one node's candidates (§1.2, §1.5, §1.6).
//
// Candidate j is accepted with probability min(1, p~(x_j) / q_j(x_j)); on a
// reject the running target becomes p~ <- norm((p~ - q_j)+). Rules differ
// only in which q_j they hand in: the child's own row (SpecInfer), one shared
// row (RRS with replacement, chain SpS) or the shared row masked by the
// earlier siblings (RRS without replacement).
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RECURSIVE_REJECTION_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RECURSIVE_REJECTION_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "algorithms/verifiers/common/tree_walk.h"
#include "framework/core/random_source.h"

namespace speclab {
namespace verifiers {

struct RejectionCandidate {
  int node = -1;
  int32_t token = -1;
  absl::Span<const double> q;  // the law the candidate was drawn from
};

// Starts from p~ = `target` and tries the candidates in order.
NodeOutcome RecursiveRejection(absl::Span<const double> target, absl::Span<const RejectionCandidate> candidates,
                               RandomSource& random);

}  // namespace verifiers
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RECURSIVE_REJECTION_H_
