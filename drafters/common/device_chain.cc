#include "drafters/common/device_chain.h"

#include <ATen/ATen.h>

#include <utility>

#include "drafters/common/fixed_length.h"

namespace speclab {

at::Tensor ToDeviceChain(int32_t root, std::vector<int32_t> drafts, int length, c10::Device device) {
  const std::vector<int32_t> fixed = ToFixedLength(std::move(drafts), length, root);
  std::vector<int64_t> chain = {root};
  chain.insert(chain.end(), fixed.begin(), fixed.end());
  return at::tensor(chain, at::TensorOptions().dtype(at::kLong)).to(device);
}

}  // namespace speclab
