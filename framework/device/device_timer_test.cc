// DeviceSeconds times the device's work alone: the host's queuing time is
// not in it, a failing work's error comes back, and work that waits for the
// device (so the host can never queue ahead of it) is refused, not mistimed.
#include "framework/device/device_timer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <chrono>
#include <thread>

#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

TEST(DeviceTimerTest, TheWorksErrorComesBack) {
  absl::StatusOr<double> seconds =
      DeviceSeconds(testing::TestDevice(), [] { return absl::InvalidArgumentError("no such forward"); });
  EXPECT_EQ(seconds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(seconds.status().message().find("no such forward"), std::string::npos);
}

TEST(DeviceTimerTest, TheWorkIsQueuedAndTimed) {
  const c10::Device device = testing::TestDevice();
  const at::Tensor x = at::ones({64, 64}, at::TensorOptions().device(device));
  at::Tensor y;
  absl::StatusOr<double> seconds = DeviceSeconds(device, [&] {
    y = at::matmul(x, x);
    return absl::OkStatus();
  });
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_GT(*seconds, 0.0);
  EXPECT_EQ(y.sum().item<double>(), 64.0 * 64 * 64);
}

// The host takes 20 ms to queue a small product (longer than the first spin,
// so the spin is lengthened): the device's time leaves those 20 ms out.
TEST(DeviceTimerTest, OnCudaTheHostsQueuingTimeIsLeftOut) {
  SPECLAB_SKIP_UNLESS_CUDA();
  const c10::Device cuda(c10::kCUDA, 0);
  const at::Tensor x = at::ones({64, 64}, at::TensorOptions().device(cuda));
  absl::StatusOr<double> seconds = DeviceSeconds(cuda, [&] {
    at::Tensor y = at::matmul(x, x);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    y = at::matmul(y, x);
    return absl::OkStatus();
  });
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_LT(*seconds, 0.010);
}

TEST(DeviceTimerTest, OnCudaWorkThatWaitsForTheDeviceIsRefused) {
  SPECLAB_SKIP_UNLESS_CUDA();
  const c10::Device cuda(c10::kCUDA, 0);
  absl::StatusOr<double> seconds = DeviceSeconds(cuda, [&] {
    torch::cuda::synchronize(0);
    return absl::OkStatus();
  });
  EXPECT_EQ(seconds.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(seconds.status().message().find("wait for the device"), std::string::npos);
}

}  // namespace
}  // namespace speclab
