// Greedy exact match on a chain, on the device (host rule:
// greedy_verifier.cc, §1.1): accept drafts while they equal the target's
// argmax before them, then emit the argmax.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/verifiers/common/chain_on_device.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_verifier.h"

namespace speclab {
namespace {

class GreedyOnDevice final : public DeviceVerifier {
 public:
  absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator&) const override {
    RETURN_IF_ERROR(verifiers::CheckDeviceChain(problem, "greedy", /*needs_draft=*/false));
    return verifiers::GreedyChainAnswer(problem);
  }
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = "greedy",
     .description = "greedy exact match on a chain, on the device (§1.1)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<GreedyOnDevice>();
     }});

}  // namespace
}  // namespace speclab
