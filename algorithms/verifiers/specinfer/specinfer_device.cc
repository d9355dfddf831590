// The device form of specinfer (host rule: specinfer_verifier.cc): recursive
// rejection over the whole tree in one kernel pair, each child tried against
// its own q row (common/recursive_rejection_device.h).
#include <memory>

#include "algorithms/verifiers/common/recursive_rejection_device.h"
#include "framework/device/device_verifier.h"

namespace speclab {
namespace {

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = "specinfer",
     .description = "SpecInfer, one q row per child (§1.5), on the device",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<verifiers::RecursiveRejectionOnDevice>("specinfer", verifiers::SiblingRows::kOwn);
     }});

}  // namespace
}  // namespace speclab
