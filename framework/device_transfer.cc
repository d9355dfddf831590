#include "framework/device_transfer.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <cstring>
#include <thread>

namespace speclab {
namespace {

at::Tensor Upload(const void* data, size_t bytes, at::IntArrayRef shape, at::ScalarType dtype, c10::Device device) {
  const bool pin = device.is_cuda();
  at::Tensor host = at::empty(shape, at::TensorOptions().dtype(dtype).pinned_memory(pin));
  if (bytes > 0) std::memcpy(host.data_ptr(), data, bytes);
  return pin ? host.to(device, /*non_blocking=*/true) : host;
}

}  // namespace

at::Tensor LongsToDevice(const std::vector<int64_t>& values, c10::Device device) {
  return Upload(values.data(), values.size() * sizeof(int64_t), {static_cast<int64_t>(values.size())}, at::kLong,
                device);
}

at::Tensor MaskToDevice(const std::vector<uint8_t>& mask, int64_t rows, int64_t cols, c10::Device device) {
  return Upload(mask.data(), mask.size(), {rows, cols}, at::kBool, device);
}

AsyncRead AsyncRead::Start(const at::Tensor& tensor) {
  AsyncRead read;
  const c10::Device device = tensor.device();
  if (device.is_cpu()) {
    read.host_ = tensor;
    return read;
  }
  read.host_ = at::empty(tensor.sizes(), tensor.options().device(at::kCPU).pinned_memory(true));
  read.host_.copy_(tensor, /*non_blocking=*/true);
  read.copied_.emplace(device.type());
  read.copied_->record(c10::impl::VirtualGuardImpl(device.type()).getStream(device));
  return read;
}

const at::Tensor& AsyncRead::Wait() {
  // Spin as cudaEventSynchronize does by default: the wait is short, and
  // waking a sleeping thread would cost more than it.
  if (copied_) {
    while (!copied_->query()) std::this_thread::yield();
    copied_.reset();
  }
  return host_;
}

}  // namespace speclab
