// `predicted_acceptance`: SpecDec++'s stop (docs/algorithms.md §3.4). A
// trained acceptance head (common/acceptance_head.h, fitted by `speclab
// train` with an `acceptance_head:` section) predicts a_i, the probability
// that draft i is accepted given that the drafts before it were, from the
// drafter's final hidden state there (SpecDec++'s input; a head trained on
// its log-probability row also serves, as the ablation); drafting stops
// after draft k once 1 - a_1 ... a_k, the predicted probability that a
// rejection has already happened, exceeds `threshold` (h), that draft kept;
// never more than `max`.
//
//   length_policy: {type: predicted_acceptance, head: models/heads/specdec.safetensors, threshold: 0.7, max: 8}
//
// The decision reads only the drafter's side of the step: lossless. With the
// chain builder and a drafter whose hidden states (or vocabulary) the head
// was trained on. Step by step it reads each drafted token's row on the
// host; pipelined, its device form (predicted_acceptance_device.cc) stops a
// pipelined chain on the device.
#include <memory>
#include <utility>

#include "algorithms/length_policies/predicted_acceptance/predicted_acceptance_options.h"
#include "framework/core/length_policy.h"
#include "framework/core/status_macros.h"

namespace speclab::predicted_acceptance {
namespace {

class PredictedAcceptanceLengthPolicy final : public DraftLengthPolicy {
 public:
  explicit PredictedAcceptanceLengthPolicy(PredictedAcceptanceOptions options)
      : options_(options), head_(std::move(options.head)) {}

  int MaxDraftLength() override { return options_.max; }
  bool wants_progress() const override { return true; }
  DraftRow draft_row() const override { return acceptance_head::RowOf(head_.head()); }
  int64_t draft_row_width() const override { return acceptance_head::RowWidth(head_.head()); }
  bool ContinueDrafting(const DraftProgress& progress) override {
    if (progress.depth <= 1) survival_ = 1.0;
    survival_ *= head_.Predict(progress);
    return !StopsAt(options_, survival_);
  }

 private:
  const PredictedAcceptanceOptions options_;
  const acceptance_head::HeadOnDevice head_;
  double survival_ = 1.0;  // the product of this step's predicted acceptances
};

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "predicted_acceptance",
    .description = "SpecDec++: stop once a head on the drafter's hidden state predicts a rejection so far above a threshold",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> {
      ASSIGN_OR_RETURN(PredictedAcceptanceOptions o, ReadPredictedAcceptanceOptions(options));
      return std::unique_ptr<DraftLengthPolicy>(std::make_unique<PredictedAcceptanceLengthPolicy>(std::move(o)));
    },
});

}  // namespace
}  // namespace speclab::predicted_acceptance
