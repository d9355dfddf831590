// `entropy`'s device form (framework/device/device_length_stop.h): the chain
// keeps its drafts up to the first whose AdaEDL estimate 1 - sqrt(γ_e H) is
// below λ, that one included, exactly as the host rule's float64 operations.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/length_policies/entropy/entropy_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"

namespace speclab::entropy {
namespace {

class EntropyStop final : public DeviceLengthStop {
 public:
  // The host rule falls monotonely as the entropy grows (a rounded product,
  // a square root, a difference): one comparison with its first stopping
  // float decides as it does, where its five float64 operations took five
  // launches a draft.
  explicit EntropyStop(const EntropyOptions& options)
      : bound_(FirstFloatWhere([options](double entropy) { return StopsAt(options, entropy); })) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override { return facts.draft_entropy >= bound_; }

 private:
  const double bound_;
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
