// RunSideBySide: each piece runs (on CUDA, each on a side stream of its
// own), what they leave is complete for the caller's stream, and the first
// error stops the rest.
#include "framework/device/side_streams.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/cuda_tests.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace speclab {
namespace {

// Pieces that each leave a large tensor (k * 0, 1, 2, ...), computed on the
// stream they run on; the caller's stream sums them after the join.
TEST(SideStreamsTest, EachPieceRunsAndTheCallersStreamSeesWhatTheyLeft) {
  const c10::Device device = testing::TestDevice();
  const int64_t kSize = device.is_cuda() ? 1 << 22 : 1 << 16;
  std::vector<at::Tensor> left(3);
  std::vector<int> order;
  std::vector<SideWork> work;
  for (int k = 0; k < 3; ++k) {
    work.push_back([&, k](std::vector<at::Tensor>& made) -> absl::Status {
      order.push_back(k);
#ifdef SPECLAB_WITH_CUDA
      if (device.is_cuda() && SideStreamsEnabled())
        EXPECT_NE(c10::cuda::getCurrentCUDAStream(device.index()), c10::cuda::getDefaultCUDAStream(device.index()))
            << "piece " << k << " runs on a side stream";
#endif
      left[k] = at::arange(kSize, at::TensorOptions().dtype(at::kDouble).device(device)).mul_(k + 1);
      for (int i = 0; i < 20; ++i) left[k].add_(1).sub_(1);  // long enough to overlap
      made = {left[k]};
      return absl::OkStatus();
    });
  }
  ASSERT_TRUE(RunSideBySide(device, work).ok());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  const double sum = (left[0] + left[1] + left[2]).sum().item<double>();
  EXPECT_DOUBLE_EQ(sum, 6.0 * (static_cast<double>(kSize) * static_cast<double>(kSize - 1) / 2));
}

TEST(SideStreamsTest, TheFirstErrorStopsTheRest) {
  const c10::Device device = testing::TestDevice();
  int ran = 0;
  std::vector<SideWork> work = {
      [&](std::vector<at::Tensor>&) { ++ran; return absl::OkStatus(); },
      [&](std::vector<at::Tensor>&) { ++ran; return absl::UnimplementedError("piece 1 has no device form"); },
      [&](std::vector<at::Tensor>&) { ++ran; return absl::OkStatus(); }};
  const absl::Status status = RunSideBySide(device, work);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("piece 1"));
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace speclab
