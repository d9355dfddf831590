// `svip`'s device form (framework/device/device_length_stop.h): the chain
// keeps its drafts up to the first whose sqrt(gamma H) exceeds the
// threshold, that one included, exactly as the host rule's float64 operations.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/length_policies/svip/svip_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"

namespace speclab::svip {
namespace {

class SvipStop final : public DeviceLengthStop {
 public:
  // The host rule is monotone in the entropy (a rounded product, a square
  // root): one comparison with its first stopping float decides as it does.
  explicit SvipStop(const SvipOptions& options)
      : bound_(FirstFloatWhere([options](double entropy) { return StopsAt(options, entropy); })) {}
  at::Tensor Stops(const DeviceDraftFacts& facts) const override { return facts.draft_entropy >= bound_; }

 private:
  const double bound_;
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
