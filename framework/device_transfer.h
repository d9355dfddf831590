// Host<->device transfers that do not stall the device queue.
//
// A pageable host-to-device copy waits for the device to drain; staging
// through pinned memory and copying non-blocking keeps the host ahead, so the
// only synchronisation of a speculative step is its one device-to-host read.
#ifndef SPECLAB_FRAMEWORK_DEVICE_TRANSFER_H_
#define SPECLAB_FRAMEWORK_DEVICE_TRANSFER_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace speclab {

// int64 [values.size()] on `device`.
at::Tensor LongsToDevice(const std::vector<int64_t>& values, c10::Device device);
// bool [rows, cols] on `device` from row-major 0/1 bytes.
at::Tensor MaskToDevice(const std::vector<uint8_t>& mask, int64_t rows, int64_t cols, c10::Device device);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_TRANSFER_H_
