// The device form of rrs_wor (host rule: rrs_wor_verifier.cc): recursive
// rejection over the whole tree in one kernel pair, each child tried against
// the first child's q row with the earlier siblings' tokens removed
// (common/recursive_rejection_device.h).
#include <memory>

#include "algorithms/verifiers/common/recursive_rejection_device.h"
#include "framework/device/device_verifier.h"

namespace speclab {
namespace {

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = "rrs_wor",
     .description = "recursive rejection sampling without replacement, masked q_j (§1.6), on the device",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<verifiers::RecursiveRejectionOnDevice>(
           "rrs_wor", verifiers::SiblingRows::kSharedWithoutReplacement);
     }});

}  // namespace
}  // namespace speclab
