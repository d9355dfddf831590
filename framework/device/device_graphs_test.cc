// DeviceGraphs runs a device form's work as it is, or on CUDA as a graph
// captured once per key and replayed: either way each call's outputs are the
// work's on that call's inputs, and a graph is captured once per key and
// input shape.
#include "framework/device/device_graphs.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

// x -> (x * scale + 1, the sum of its rows), and a layout of [rows].
DeviceGraphs::Work Affine(double scale) {
  return [scale](const std::vector<at::Tensor>& in) -> absl::StatusOr<DeviceOutputs> {
    const at::Tensor y = in[0] * scale + 1;
    return DeviceOutputs{.tensors = {y, y.sum(0), at::Tensor()}, .layout = {in[0].size(0)}};
  };
}

TEST(DeviceGraphsTest, EachCallGivesTheWorksOutputsOnItsInputs) {
  const c10::Device device = testing::TestDevice();
  DeviceGraphs graphs;
  for (int call = 0; call < 3; ++call) {
    const at::Tensor x = at::randn({4, 3}, at::TensorOptions().device(device));
    absl::StatusOr<DeviceOutputs> out = graphs.Run(std::make_tuple(2.0), {x}, Affine(2.0));
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->tensors.size(), 3u);
    EXPECT_TRUE(at::allclose(out->tensors[0], x * 2.0 + 1)) << "call " << call;
    EXPECT_TRUE(at::allclose(out->tensors[1], (x * 2.0 + 1).sum(0))) << "call " << call;
    EXPECT_FALSE(out->tensors[2].defined());
    EXPECT_EQ(out->layout, std::vector<int64_t>{4});
  }
  // Outputs are copies: the next call leaves the last one's as they were.
  const at::Tensor x = at::ones({4, 3}, at::TensorOptions().device(device));
  absl::StatusOr<DeviceOutputs> kept = graphs.Run(std::make_tuple(2.0), {x}, Affine(2.0));
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(graphs.Run(std::make_tuple(2.0), {x * 5}, Affine(2.0)).ok());
  EXPECT_TRUE(at::allclose(kept->tensors[0], at::full({4, 3}, 3.0, x.options())));
  EXPECT_EQ(graphs.captures(), 0 + (device.is_cuda() ? 1 : 0));
}

TEST(DeviceGraphsTest, AGraphIsCapturedPerKeyAndInputShape) {
  SPECLAB_SKIP_UNLESS_CUDA();
  const auto cuda = at::TensorOptions().device(c10::Device(c10::kCUDA, 0));
  DeviceGraphs graphs;
  ASSERT_TRUE(graphs.Run(std::make_tuple(2.0), {at::ones({4, 3}, cuda)}, Affine(2.0)).ok());
  ASSERT_TRUE(graphs.Run(std::make_tuple(2.0), {at::ones({4, 3}, cuda)}, Affine(2.0)).ok());
  EXPECT_EQ(graphs.captures(), 1);
  absl::StatusOr<DeviceOutputs> other = graphs.Run(std::make_tuple(3.0), {at::ones({4, 3}, cuda)}, Affine(3.0));
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(at::allclose(other->tensors[0], at::full({4, 3}, 4.0, cuda)));
  ASSERT_TRUE(graphs.Run(std::make_tuple(2.0), {at::ones({5, 3}, cuda)}, Affine(2.0)).ok());
  EXPECT_EQ(graphs.captures(), 3);
}

// Runs are counted by work and input shape, for pricing drafting: each key
// has a positive price per run (a graph replayed on the device's clock on
// CUDA, the runs' mean wall time elsewhere); a failed run is not counted and
// a key never run has no price.
TEST(DeviceGraphsTest, RunsAreCountedAndPricedByKey) {
  const auto options = at::TensorOptions().device(testing::TestDevice());
  DeviceGraphs graphs;
  for (int call = 0; call < 3; ++call) ASSERT_TRUE(graphs.Run(std::make_tuple(2.0), {at::ones({4, 3}, options)}, Affine(2.0)).ok());
  ASSERT_TRUE(graphs.Run(std::make_tuple(2.0), {at::ones({5, 3}, options)}, Affine(2.0)).ok());
  const DeviceGraphs::Work failing = [](const std::vector<at::Tensor>&) -> absl::StatusOr<DeviceOutputs> {
    return absl::FailedPreconditionError("the work refuses");
  };
  EXPECT_FALSE(graphs.Run(std::make_tuple(7.0), {at::ones({4, 3}, options)}, failing).ok());
  std::vector<int64_t> counts;
  for (const auto& [key, runs] : graphs.runs()) counts.push_back(runs);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0] + counts[1], 4);
  EXPECT_EQ(std::max(counts[0], counts[1]), 3);
  for (const auto& [key, runs] : graphs.runs()) {
    absl::StatusOr<double> seconds = graphs.SecondsPerRun(key, 5);
    ASSERT_TRUE(seconds.ok()) << seconds.status();
    EXPECT_GT(*seconds, 0.0) << key;
    EXPECT_LT(*seconds, 1.0) << key;
  }
  EXPECT_EQ(graphs.SecondsPerRun("no such work", 5).status().code(), absl::StatusCode::kNotFound);
  graphs.ResetRuns();
  EXPECT_TRUE(graphs.runs().empty());
}

TEST(DeviceGraphsTest, BadInputsAndFailingWorkAreErrors) {
  const c10::Device device = testing::TestDevice();
  DeviceGraphs graphs;
  absl::StatusOr<DeviceOutputs> undefined = graphs.Run(std::make_tuple(), {at::Tensor()}, Affine(1.0));
  EXPECT_EQ(undefined.status().code(), absl::StatusCode::kInvalidArgument);
  const DeviceGraphs::Work failing = [](const std::vector<at::Tensor>&) -> absl::StatusOr<DeviceOutputs> {
    return absl::FailedPreconditionError("the work refuses");
  };
  absl::StatusOr<DeviceOutputs> failed =
      graphs.Run(std::make_tuple(), {at::ones({2}, at::TensorOptions().device(device))}, failing);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(graphs.captures(), 0);
}

}  // namespace
}  // namespace speclab
