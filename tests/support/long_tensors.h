// int64 tensors in tests: made from values on a device, and read back as values.
#ifndef SPECLAB_TESTS_SUPPORT_LONG_TENSORS_H_
#define SPECLAB_TESTS_SUPPORT_LONG_TENSORS_H_

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace speclab::testing {

inline std::vector<int64_t> LongValues(const at::Tensor& t) {
  const at::Tensor host = t.to(at::kCPU).contiguous();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
}

inline at::Tensor LongTensor(std::vector<int64_t> values, c10::Device device) {
  return at::tensor(std::move(values), at::TensorOptions().dtype(at::kLong)).to(device);
}

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_LONG_TENSORS_H_
