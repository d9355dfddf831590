// `svip`'s device form (framework/device/device_length_stop.h): the chain
// keeps its drafts up to the first whose sqrt(gamma H) exceeds the
// threshold, that one included, in the host rule's float64 operations.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/length_policies/svip/svip_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"

namespace speclab::svip {
namespace {

class SvipStop final : public DeviceLengthStop {
 public:
  explicit SvipStop(const SvipOptions& options) : options_(options) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override {
    return (options_.gamma * facts.draft_entropy.to(at::kDouble)).sqrt() > options_.threshold;
  }

 private:
  const SvipOptions options_;
};

const bool kRegistered = DeviceLengthStopRegistry::Add({
    .name = "svip",
    .description = "the SVIP stop on the device",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DeviceLengthStop>> {
      ASSIGN_OR_RETURN(SvipOptions o, ReadSvipOptions(options));
      return std::unique_ptr<DeviceLengthStop>(std::make_unique<SvipStop>(o));
    },
});

}  // namespace
}  // namespace speclab::svip
