// Drafting a fixed TreeShape with a distribution drafter (`static`, `sequoia`).
//
// EAGLE-1 semantics (docs/algorithms.md §2.3): the children of a node are
// chosen from the drafter's q at that node's own path. One drafter forward
// per depth lists every node of the level that has children.
//  - Top-k (deterministic): rank r is the r-th most likely token by the
//    drafter's logits. Tokens stay on the device; no host read at all.
//    The draft is kDeterministic: verify with greedy or point_mass.
//  - Without replacement (`sample` at temperature > 0): the children of a
//    node are successive draws without replacement from its warped q
//    (Gumbel-top-k on the device), rank r being the r-th draw; draft_probs
//    row i is the unmasked q of i's parent; kWithoutReplacement (rrs_wor,
//    traversal). A draw past q's support does not exist, so such children
//    (and their subtrees) are dropped: one device-to-host read per level of
//    the keys decides which. At temperature 0 this mode drafts top-k.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_DRAFTING_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_DRAFTING_H_

#include "absl/status/statusor.h"
#include "algorithms/tree_builders/common/tree_shape.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace tree_builders {

// `builder` names the caller in errors. With `sample_without_replacement`
// the shape must have contiguous ranks (TreeShape::FirstRankGap() < 0).
absl::StatusOr<DraftTree> DraftShape(Drafter& drafter, const BuildRequest& request, const TreeShape& shape,
                                     bool sample_without_replacement, const char* builder);

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_DRAFTING_H_
