// Host<->device transfers that do not stall the device queue.
//
// A pageable host-to-device copy waits for the device to drain; staging
// through pinned memory and copying non-blocking keeps the host ahead, so the
// only synchronisation of a speculative step is its one device-to-host read.
#ifndef SPECLAB_FRAMEWORK_DEVICE_TRANSFER_H_
#define SPECLAB_FRAMEWORK_DEVICE_TRANSFER_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <c10/core/Event.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace speclab {

// int64 [values.size()] on `device`.
at::Tensor LongsToDevice(const std::vector<int64_t>& values, c10::Device device);
// bool [rows, cols] on `device` from row-major 0/1 bytes.
at::Tensor MaskToDevice(const std::vector<uint8_t>& mask, int64_t rows, int64_t cols, c10::Device device);

// A device-to-host read collected later: Start() queues the copy behind the
// work already queued on the tensor's device and returns at once; Wait()
// blocks until the copy is done, not until later work is (as .item() or
// .to(kCPU) would). On the CPU there is nothing to wait for.
class AsyncRead {
 public:
  static AsyncRead Start(const at::Tensor& tensor);
  // The host copy; valid until this AsyncRead is destroyed.
  const at::Tensor& Wait();

 private:
  at::Tensor host_;
  std::optional<c10::Event> copied_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_TRANSFER_H_
