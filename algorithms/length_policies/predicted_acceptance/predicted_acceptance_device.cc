// `predicted_acceptance`'s device form (framework/device/device_length_stop.h):
// the head predicts every draft's acceptance from the chain's kept rows
// (hidden states or log-probabilities) in one batch, and the chain keeps its
// drafts up to the first whose running product makes 1 - product exceed h,
// that one included, in the host rule's float64 operations.
#include <ATen/ATen.h>

#include <memory>
#include <utility>

#include "algorithms/length_policies/predicted_acceptance/predicted_acceptance_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"

namespace speclab::predicted_acceptance {
namespace {

class PredictedAcceptanceStop final : public DeviceLengthStop {
 public:
  explicit PredictedAcceptanceStop(PredictedAcceptanceOptions options)
      : threshold_(options.threshold), head_(std::move(options.head)) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override {
    const at::Tensor survival = head_.Predict(facts).cumprod(0);
    return (1.0 - survival) > threshold_;
  }

 private:
  const double threshold_;
  const acceptance_head::HeadOnDevice head_;
};

const bool kRegistered = DeviceLengthStopRegistry::Add({
    .name = "predicted_acceptance",
    .description = "the SpecDec++ stop on the device",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DeviceLengthStop>> {
      ASSIGN_OR_RETURN(PredictedAcceptanceOptions o, ReadPredictedAcceptanceOptions(options));
      return std::unique_ptr<DeviceLengthStop>(std::make_unique<PredictedAcceptanceStop>(std::move(o)));
    },
});

}  // namespace
}  // namespace speclab::predicted_acceptance
