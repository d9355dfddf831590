// A chain a token-only drafter found on the host, in the shape its device
// form's ContinuationAt returns (framework/device/device_drafter.h): for
// device forms' CPU paths, which follow their kernels' rule on the host.
#ifndef SPECLAB_DRAFTERS_COMMON_DEVICE_CHAIN_H_
#define SPECLAB_DRAFTERS_COMMON_DEVICE_CHAIN_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace speclab {

// [length + 1] int64 on `device`: `root`, then ToFixedLength(drafts, length,
// root) (fixed_length.h).
at::Tensor ToDeviceChain(int32_t root, std::vector<int32_t> drafts, int length, c10::Device device);

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_COMMON_DEVICE_CHAIN_H_
