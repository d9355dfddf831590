// `disco`'s device form (framework/device/device_length_stop.h): the
// classifier scores every draft of the chain from its kept log-probability
// rows in one batch, and the chain keeps its drafts up to the first scored
// below the threshold, that one included, in the host rule's float64
// operations.
#include <ATen/ATen.h>

#include <memory>
#include <utility>

#include "algorithms/length_policies/disco/disco_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"

namespace speclab::disco {
namespace {

class DiscoStop final : public DeviceLengthStop {
 public:
  explicit DiscoStop(DiscoOptions options) : threshold_(options.threshold), head_(std::move(options.head)) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override {
    return head_.Predict(facts) < threshold_;
  }

 private:
  const double threshold_;
  const acceptance_head::HeadOnDevice head_;
};

const bool kRegistered = DeviceLengthStopRegistry::Add({
    .name = "disco",
    .description = "the DISCO stop on the device",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DeviceLengthStop>> {
      ASSIGN_OR_RETURN(DiscoOptions o, ReadDiscoOptions(options));
      return std::unique_ptr<DeviceLengthStop>(std::make_unique<DiscoStop>(std::move(o)));
    },
});

}  // namespace
}  // namespace speclab::disco
