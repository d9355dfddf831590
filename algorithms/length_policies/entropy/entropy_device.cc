// `entropy`'s device form (framework/device/device_length_stop.h): the chain
// keeps its drafts up to the first whose AdaEDL estimate 1 - sqrt(γ_e H) is
// below λ, that one included, in the host rule's float64 operations.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/length_policies/entropy/entropy_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"

namespace speclab::entropy {
namespace {

class EntropyStop final : public DeviceLengthStop {
 public:
  explicit EntropyStop(const EntropyOptions& options) : options_(options) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override {
    const at::Tensor estimate = 1.0 - (facts.draft_entropy.to(at::kDouble) * options_.gamma_e).sqrt();
    return estimate < options_.threshold;
  }

 private:
  const EntropyOptions options_;
};

const bool kRegistered = DeviceLengthStopRegistry::Add({
    .name = "entropy",
    .description = "the AdaEDL stop on the device",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DeviceLengthStop>> {
      ASSIGN_OR_RETURN(EntropyOptions o, ReadEntropyOptions(options));
      return std::unique_ptr<DeviceLengthStop>(std::make_unique<EntropyStop>(o));
    },
});

}  // namespace
}  // namespace speclab::entropy
