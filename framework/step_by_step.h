// StepByStep: the engine's speculative step with the host in the loop, in
// the algorithm's five parts:
//
//   Draft   the tree builder asks the drafter for a tree (the length policy
//           bounds it);
//   Score   the target scores every node in one forward (ancestor mask,
//           depth positions), and the drafter's riders beside them;
//   Verify  one device-to-host transfer brings back what the verifier reads
//           (or the verifier's device form decides on the device), and the
//           verifier picks the accepted path and the extra token;
//   Commit  the target's cache keeps the path (KV compaction, no
//           recomputation); the drafter gets the path and the target
//           features it asked for;
//   Adapt   the length policy observes the outcome.
//
// Every method runs this way; those whose parts all have device forms may
// run pipelined instead (framework/device/pipelined_steps.h), with the same law.
#ifndef SPECLAB_FRAMEWORK_STEP_BY_STEP_H_
#define SPECLAB_FRAMEWORK_STEP_BY_STEP_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/core/random_source.h"
#include "framework/core/verifier.h"
#include "framework/draft_tree.h"
#include "framework/generation.h"
#include "framework/method.h"
#include "framework/model/language_model.h"

namespace speclab {

// The random streams of a speculative generation.
struct Randomness {
  at::Generator draft;   // drafting (never the verifier's, docs/algorithms.md §1.3.5)
  SeededRandomSource verify_host;
  at::Generator verify;  // device verifiers
};

// What a generation notes where a lossless q-based rule verifies the top-k
// picks a sampling tree builder drafts at temperature 0 (StepByStep::rule_note()).
std::string GreedyStandInNote(const Method& method);

class StepByStep {
 public:
  // One step as it goes through the parts.
  struct Step {
    DraftTree draft;
    RiderTokens riders;      // the drafter's, scored beside the tree (Drafter::Riders())
    at::Tensor target_rows;  // [n, vocab]: the target's processed rows of every node (Score)
    Verdict verdict;         // (Verify)
    std::vector<int32_t> emitted;  // the accepted tokens and the extra token (Commit)
    std::chrono::steady_clock::time_point started, drafted, verified;
  };

  // The target holds the prompt but its last token and the drafter was Reset
  // with it; all must outlive this.
  StepByStep(LanguageModel& target, Method& method, const DecodeOptions& options, Randomness& random);

  // `context`: every committed token, the root last.
  absl::StatusOr<Step> Draft(absl::Span<const int32_t> context);
  absl::Status Score(Step& step);
  absl::Status Verify(Step& step);
  absl::Status Commit(Step& step);
  StepStats Adapt(const Step& step);
  // Ends the generation: a commit still waiting is made.
  absl::Status Finish();

  // Why some steps were verified by another rule than the method's, or "":
  // at temperature 0 a sampling builder's drafts are its top-k picks, which
  // no q is the law of; every lossless rule then reduces to greedy exact
  // match (p is one-hot: greedy decoding's token is the only one it may
  // emit), so that rule verifies them.
  const std::string& rule_note() const { return rule_note_; }

 private:
  void NoteGreedyStandIn();  // sets rule_note()

  LanguageModel& target_;
  Method& method_;
  const DecodeOptions& options_;
  Randomness& random_;
  const TargetFeatureRequest features_;
  // The target's commit of a step's accepted path waits until the next
  // step's draft is queued: the drafter's work (a CUDA graph, for model
  // drafters) then starts on the device at once, and the host prepares the
  // compaction while it runs instead of while the device idles. Not where
  // the drafter runs the target itself: it must see the committed cache.
  const bool defer_commit_;
  std::optional<std::vector<int64_t>> pending_commit_;
  const bool greedy_for_top_k_;            // a lossless q-based rule at T = 0 (rule_note())
  std::unique_ptr<Verifier> greedy_rule_;  // its stand-in, made on first use
  std::string rule_note_;
};

// A generation of `prompt` plus `extra` tokens fits the model's cache.
absl::Status CheckCapacity(const LanguageModel& model, absl::Span<const int32_t> prompt, int extra);

// A phase boundary: on CUDA, where `synchronize`, waits for queued work so
// that each phase's time is its own rather than the next host wait's.
std::chrono::steady_clock::time_point MarkPhase(c10::Device device, bool synchronize);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_STEP_BY_STEP_H_
