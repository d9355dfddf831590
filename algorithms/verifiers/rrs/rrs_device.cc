// The device form of rrs (host rule: rrs_verifier.cc): recursive
// rejection over the whole tree in one kernel pair, each child tried against
// its parent's first child's q row (common/recursive_rejection_device.h).
#include <memory>

#include "algorithms/verifiers/common/recursive_rejection_device.h"
#include "framework/device/device_verifier.h"

namespace speclab {
namespace {

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = "rrs",
     .description = "recursive rejection sampling with replacement (§1.5), on the device",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<verifiers::RecursiveRejectionOnDevice>("rrs", verifiers::SiblingRows::kShared);
     }});

}  // namespace
}  // namespace speclab
