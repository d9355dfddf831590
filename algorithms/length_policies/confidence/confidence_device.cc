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
  // The host rule goes on from the smallest float at or above the threshold
  // (no float lies between the two): one float32 comparison with it decides
  // as the host rule's float64 one, where widening the facts took a launch
  // of its own.
  explicit ConfidenceStop(const ConfidenceOptions& options)
      : bound_(FirstFloatWhere([options](double top) { return GoesOn(options, top); })) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override { return facts.top_probability < bound_; }

 private:
  const double bound_;
};

const bool kRegistered = DeviceLengthStopRegistry::Add({
    .name = "confidence",
    .description = "the confidence stop on the device",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DeviceLengthStop>> {
      ASSIGN_OR_RETURN(ConfidenceOptions o, ReadConfidenceOptions(options));
      return std::unique_ptr<DeviceLengthStop>(std::make_unique<ConfidenceStop>(o));
    },
});

}  // namespace
}  // namespace speclab::confidence
