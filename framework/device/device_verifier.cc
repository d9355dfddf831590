#include "framework/device/device_verifier.h"

namespace speclab {

absl::StatusOr<at::Tensor> DeviceVerifier::VerifyTree(const DeviceTreeProblem&, at::Generator&) const {
  return absl::UnimplementedError("this rule verifies chains only on the device");
}

}  // namespace speclab
