// `confidence`'s device form (framework/device/device_length_stop.h): the
// chain keeps its drafts up to the first whose drafter top probability is
// below the threshold, that one included, as the host rule does.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/length_policies/confidence/confidence_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"

namespace speclab::confidence {
namespace {

class ConfidenceStop final : public DeviceLengthStop {
 public:
  explicit ConfidenceStop(double threshold) : threshold_(threshold) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override {
    // As the host rule's double comparison: the float32 facts widened first.
    return facts.top_probability.to(at::kDouble) < threshold_;
  }

 private:
  const double threshold_;
};

const bool kRegistered = DeviceLengthStopRegistry::Add({
    .name = "confidence",
    .description = "the confidence stop on the device",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DeviceLengthStop>> {
      ASSIGN_OR_RETURN(ConfidenceOptions o, ReadConfidenceOptions(options));
      return std::unique_ptr<DeviceLengthStop>(std::make_unique<ConfidenceStop>(o.threshold));
    },
});

}  // namespace
}  // namespace speclab::confidence
