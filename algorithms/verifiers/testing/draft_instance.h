// A verification instance for exact tests: table models, a tree shape and a
// drafting procedure (docs/algorithms.md §0.4).
//
// DraftTree draws a tree through a RandomSource, so the same code serves
// exact enumeration (with the enumerating source) and Monte Carlo runs (with
// SeededRandomSource). MakeProblem then fills the VerificationProblem the way
// the engine would: target rows p(·|path(i)) for every node, their argmax,
// and (unless the draft is token-only) the unmasked q row each node's token
// was drawn from.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TESTING_DRAFT_INSTANCE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TESTING_DRAFT_INSTANCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/verifiers/testing/table_model.h"
#include "framework/core/random_source.h"
#include "framework/core/token_tree.h"
#include "framework/core/verifier.h"

namespace speclab {
namespace enumeration {

enum class DraftMode {
  kIndependent,          // children of a node i.i.d. from the shared row Q[ctx]
  kPerChildIndependent,  // child j drawn from its own drafter Q_j[ctx] (SpecInfer's multi-drafter case)
  kWithoutReplacement,   // siblings drawn in order without replacement from Q[ctx]
  kTopK,                 // deterministic: the b most likely tokens of Q[ctx]; token-only
  kTopKOneHot,           // deterministic top-b handed over with q = one-hot(token) per child
};

const char* DraftModeName(DraftMode mode);

struct Instance {
  std::string name;
  TableModelSpec target;
  TableModelSpec draft;
  std::vector<int> branching = {1};  // children per node at each depth: {2, 1} is the tree [2,1]
  DraftMode mode = DraftMode::kIndependent;
  int32_t root_token = 0;
  // Negative controls only: the sampling mode the problem claims, when it
  // differs from the truth. Draft rows are attached iff the claim is not
  // kDeterministic (then the drafter's Q rows, as a buggy builder would).
  std::optional<DraftSampling> declared_sampling;

  int depth() const { return static_cast<int>(branching.size()); }
  int vocab() const {
    return target.constant_row.empty() ? target.vocab : static_cast<int>(target.constant_row.size());
  }
  // Shape and mode, e.g. "[2,1] independent V=3 seed=7".
  std::string Describe() const;
};

DraftSampling TrueSampling(DraftMode mode);

struct DraftedTree {
  TokenTree tree{0};
  std::vector<std::vector<double>> rows;  // per node: the unmasked row its token was drawn from (root: empty)
};

// Draws the tree with `random` (Categorical choices only).
absl::StatusOr<DraftedTree> DraftTree(const Instance& instance, const TableModel& draft_model, RandomSource& random);

// The engine's view of a drafted tree. `drafted` must outlive the problem.
VerificationProblem MakeProblem(const Instance& instance, const TableModel& target_model, const DraftedTree& drafted);

}  // namespace enumeration
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TESTING_DRAFT_INSTANCE_H_
