#include "experiments/device_trace.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/version.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/generation.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;

// The GPU when there is one: the trace must then hold device kernels too.
c10::Device TestDevice() { return at::hasCUDA() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU); }

std::string TracePath() {
  return ::testing::TempDir() + "/device_trace_" + std::to_string(::getpid()) + ".json";
}

absl::Status MatrixProduct() {
  const at::Tensor a = at::ones({64, 64}, at::TensorOptions().device(TestDevice()));
  const double sum = at::mm(a, a).sum().item<double>();
  return sum == 64.0 * 64 * 64 ? absl::OkStatus() : absl::InternalError("wrong product");
}

TEST(DeviceTraceTest, WritesAChromeTraceOfTheWork) {
  const std::string path = TracePath();
  const absl::Status status = TraceToFile(path, TestDevice().is_cuda(), MatrixProduct);
#if TORCH_VERSION_MAJOR >= 2
  ASSERT_TRUE(status.ok()) << status;
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("traceEvents"));
  EXPECT_THAT(text.str(), HasSubstr("aten::mm"));
  std::filesystem::remove(path);
#else
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(status.message()), HasSubstr("needs LibTorch 2.x"));
  EXPECT_FALSE(std::filesystem::exists(path));
#endif
}

TEST(DeviceTraceTest, TheWorksErrorWins) {
  const absl::Status status = TraceToFile(TracePath(), false, [] { return absl::DataLossError("work failed"); });
#if TORCH_VERSION_MAJOR >= 2
  EXPECT_EQ(status, absl::DataLossError("work failed"));
#else
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
#endif
}

TEST(DeviceTraceTest, TracedPassesTheGenerationsStatusOn) {
  EXPECT_TRUE(Traced("p", Generation{}).ok());
  EXPECT_EQ(Traced("p", absl::StatusOr<Generation>(absl::AbortedError("x"))), absl::AbortedError("x"));
}

}  // namespace
}  // namespace speclab
