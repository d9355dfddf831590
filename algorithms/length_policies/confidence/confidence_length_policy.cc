// `confidence`: draft while the drafter is sure of itself (BiLD's fallback
// rule; transformers' assistant_confidence_threshold; docs/algorithms.md
// §3.3): after each drafted token, stop once the largest probability of the
// drafter's own distribution there (DraftProgress::top_probability, before
// the sampling warp) is below `threshold`; never more than `max` tokens. The
// token that fell below is kept, as transformers keeps it.
//
//   length_policy: {type: confidence, threshold: 0.4, max: 8}
//
// The decision reads only the drafter's side of the step, never the
// verifier's: lossless. With the chain builder only. Step by step it is taken
// after every drafted token, on the host (one read a token); pipelined, its
// device form (confidence_device.cc) stops a pipelined chain on the device where it
// would have stopped.
#include <memory>

#include "algorithms/length_policies/confidence/confidence_options.h"
#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

class ConfidenceLengthPolicy final : public DraftLengthPolicy {
 public:
  explicit ConfidenceLengthPolicy(const confidence::ConfidenceOptions& options) : options_(options) {}

  int MaxDraftLength() override { return options_.max; }
  bool wants_progress() const override { return true; }
  bool ContinueDrafting(const DraftProgress& progress) override {
    return confidence::GoesOn(options_, progress.top_probability);
  }

 private:
  const confidence::ConfidenceOptions options_;
};

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "confidence",
    .description = "stop drafting once the drafter's top probability falls below a threshold (BiLD, transformers)",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> {
      ASSIGN_OR_RETURN(confidence::ConfidenceOptions o, confidence::ReadConfidenceOptions(options));
      return std::unique_ptr<DraftLengthPolicy>(std::make_unique<ConfidenceLengthPolicy>(o));
    },
});

}  // namespace
}  // namespace speclab
