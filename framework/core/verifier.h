// Verifier: decides which drafted path is accepted and draws the extra token.
//
// Verifiers run on the host on one VerificationProblem per step. The engine
// fills it with one device-to-host transfer: the target's processed
// distributions p at every tree node, and (when the tree builder sampled its
// tokens) the draft distributions q they were drawn from. Rules are in
// docs/algorithms.md §1.
#ifndef SPECLAB_FRAMEWORK_CORE_VERIFIER_H_
#define SPECLAB_FRAMEWORK_CORE_VERIFIER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/core/random_source.h"
#include "framework/core/token_tree.h"

namespace speclab {

// Dense probability rows on the host, one per tree node.
class ProbabilityRows {
 public:
  ProbabilityRows() = default;
  ProbabilityRows(int rows, int vocab) : vocab_(vocab), data_(static_cast<size_t>(rows) * vocab, 0.0) {}
  bool empty() const { return data_.empty(); }
  int rows() const { return vocab_ == 0 ? 0 : static_cast<int>(data_.size() / vocab_); }
  int vocab() const { return vocab_; }
  absl::Span<const double> row(int i) const { return {&data_[static_cast<size_t>(i) * vocab_], static_cast<size_t>(vocab_)}; }
  absl::Span<double> mutable_row(int i) { return {&data_[static_cast<size_t>(i) * vocab_], static_cast<size_t>(vocab_)}; }
  std::vector<double>& data() { return data_; }

 private:
  int vocab_ = 0;
  std::vector<double> data_;
};

// How the tree builder chose the draft tokens; decides which q a rule must use.
enum class DraftSampling {
  kDeterministic,           // argmax / top-k / lookup: q rows are not a sampling law
  kIndependent,             // every child drawn i.i.d. (with replacement) from its q row
  kWithoutReplacement,      // siblings drawn in order without replacement from one q row
};

struct VerificationProblem {
  const TokenTree* tree = nullptr;
  // p(. | path(i)) after the sampling warp, for every node i. At temperature 0
  // these rows are one-hot on the target's argmax.
  ProbabilityRows target;
  // argmax of every target row (always filled; enough for greedy rules).
  std::vector<int32_t> target_argmax;
  // Row i (i > 0): the (unmasked) distribution node i's token was drawn from.
  // Empty unless the builder sampled its tokens.
  ProbabilityRows draft;
  DraftSampling sampling = DraftSampling::kDeterministic;
};

// The accepted root-to-node path (root excluded) and the extra token:
// a step emits tokens of `accepted` then `extra_token`.
struct Verdict {
  std::vector<int> accepted;
  int32_t extra_token = -1;
};

enum class Losslessness { kLossless, kLossy };

// What a verifier needs from the rest of the method; checked at config load.
struct VerifierTraits {
  Losslessness losslessness = Losslessness::kLossless;
  bool needs_draft_distributions = false;  // refuses token-only drafts
  bool chain_only = false;                 // refuses trees with branching
  bool needs_target_rows = true;           // false: reads only target_argmax
  // Tries siblings against one q row they share (drawn i.i.d. or without
  // replacement from it): refuses trees whose branches come from different
  // drafters (TreeBuilderTraits::drafts_per_part).
  bool needs_shared_sibling_rows = false;
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual VerifierTraits traits() const = 0;
  virtual absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const = 0;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_VERIFIER_H_
