// `confidence`'s device form (framework/device/device_length_stop.h): the
// chain keeps its drafts up to the first whose drafter top probability is
// below the threshold, that one included, as the host rule does.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <memory>

#include "algorithms/length_policies/confidence/confidence_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"

namespace speclab::confidence {
namespace {

class ConfidenceStop final : public DeviceLengthStop {
 public:
  explicit ConfidenceStop(double threshold) : bound_(FloatBound(threshold)) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override { return facts.top_probability < bound_; }

 private:
  // The host rule compares the float32 fact, widened, with the threshold in
  // double: x < threshold. For a float x that holds exactly where x < the
  // smallest float >= threshold (no float lies between the two), a
  // comparison in float32 with no widening launch. A float bound passes
  // ATen's scalar-to-float conversion unrounded.
  static double FloatBound(double threshold) {
    float bound = static_cast<float>(threshold);
    if (static_cast<double>(bound) < threshold) bound = std::nextafter(bound, std::numeric_limits<float>::infinity());
    return bound;
  }

  const double bound_;
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
