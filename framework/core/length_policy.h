// DraftLengthPolicy: how many tokens to draft this step, and when to stop early.
//
// Policies see only drafter-side information while drafting and verified
// outcomes after the step, never the verifier's uniforms, so every policy
// keeps the verifier's losslessness (docs/algorithms.md §3).
#ifndef SPECLAB_FRAMEWORK_CORE_LENGTH_POLICY_H_
#define SPECLAB_FRAMEWORK_CORE_LENGTH_POLICY_H_

#include <cstdint>

#include "absl/types/span.h"
#include "framework/core/registry.h"

namespace speclab {

// The row a length policy reads of each drafted token besides its summary
// statistics (DraftLengthPolicy::draft_row()), if any.
enum class DraftRow {
  kNone,
  // The drafter's own log-probabilities there (log-softmax of its logits,
  // before the sampling warp).
  kLogProbs,
  // The drafter's final hidden state there: the final norm's output, which
  // its LM head reads (Drafter::hidden_size() wide).
  kHidden,
};

// Drafter-side facts about the token just drafted on the current path.
struct DraftProgress {
  int depth = 0;                  // drafted tokens on the path so far (>= 1)
  double draft_probability = 1;   // q(token) of the drafted token (1 for token-only drafts)
  // The entropy (nats) and the largest probability of the drafter's own
  // distribution at that position (softmax of its logits, before the
  // sampling warp: at temperature 0 q is one-hot, this is not); 0 and 1 for
  // token-only drafts.
  double draft_entropy = 0;
  double top_probability = 1;
  // The row the policy reads (draft_row()), a trained head's input: the
  // drafter's log-probabilities there (kLogProbs) or its final hidden state
  // (kHidden). Empty where the policy reads the other or none.
  absl::Span<const float> log_probs;
  absl::Span<const float> hidden;
};

// What verification made of one step.
struct StepOutcome {
  int drafted = 0;          // tokens on the longest drafted path
  int accepted = 0;         // drafts accepted (the extra token not counted)
  int tree_nodes = 0;       // drafted nodes in the tree (root excluded)
  double step_seconds = 0;  // wall time of the whole step
};

class DraftLengthPolicy {
 public:
  virtual ~DraftLengthPolicy() = default;
  // Upper bound on the draft depth for the coming step (>= 1).
  virtual int MaxDraftLength() = 0;
  // True if ContinueDrafting() reads the progress: builders then read each
  // drafted token's probability back to the host (one sync per draft token).
  virtual bool wants_progress() const { return false; }
  // The row ContinueDrafting() reads of each drafted token (DraftProgress::
  // log_probs or hidden; any but kNone implies wants_progress()): builders
  // then read each drafted token's row back (step by step), or keep the rows
  // on the device for the policy's device form (DeviceDraftFacts).
  virtual DraftRow draft_row() const { return DraftRow::kNone; }
  // The width those rows must have (a trained head's input: the drafter's
  // vocabulary or hidden size), checked when the method is loaded.
  virtual int64_t draft_row_width() const { return 0; }
  // True if MaxDraftLength() never changes and ContinueDrafting() always
  // continues: the engine may then queue a step before it has observed the
  // one before (pipelined chains); Observe() still sees every step, in order.
  virtual bool length_is_fixed() const { return false; }
  // True if the policy may be asked MaxDraftLength() for a step before it has
  // observed the step before: its choices then lag one step (still lossless:
  // they read past outcomes only), and the engine may pipeline chains with it,
  // saying so. Observe() still sees every step, in order.
  virtual bool may_observe_late() const { return false; }
  // The most MaxDraftLength() will ever return: the room a pipelined step
  // needs. MaxDraftLength() itself where the length never moves.
  virtual int MaxDraftLengthBound() { return MaxDraftLength(); }
  // Called after each drafted token of a chain; false stops drafting.
  virtual bool ContinueDrafting(const DraftProgress& progress) { return true; }
  // Called once per step after verification.
  virtual void Observe(const StepOutcome& outcome) {}
  // Called at the start of every generation (a new prompt).
  virtual void Reset() {}
};

using LengthPolicyRegistry = Registry<DraftLengthPolicy>;

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_LENGTH_POLICY_H_
