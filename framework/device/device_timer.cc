#include "framework/device/device_timer.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/error_text.h"

#ifdef SPECLAB_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace speclab {
namespace {

absl::StatusOr<double> HostSeconds(const std::function<absl::Status()>& queue) {
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(queue());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

#ifdef SPECLAB_WITH_CUDA
absl::StatusOr<double> CudaSeconds(c10::Device device, const std::function<absl::Status()>& queue) {
  c10::cuda::CUDAGuard guard(device);
  int64_t cycles = int64_t{1} << 21;  // about a millisecond on a data-centre GPU
  for (int attempt = 0; attempt < 3; ++attempt) {
    at::cuda::CUDAEvent before(cudaEventDefault), held(cudaEventDefault), end(cudaEventDefault);
    before.record();
    at::cuda::sleep(cycles);
    held.record();
    const auto host_start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(queue());
    const double host_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count();
    end.record();
    // The spin still running means every launch of the work was queued
    // before the device reached it: nothing between the events waited on the host.
    const bool host_ahead = !held.query();
    end.synchronize();
    if (host_ahead) return held.elapsed_time(end) / 1e3;
    // Spin for twice the host's queuing time next, with the spin's measured rate.
    const double spin_ms = std::max<double>(before.elapsed_time(held), 1e-3);
    cycles = static_cast<int64_t>(static_cast<double>(cycles) * (2.0 * host_ms / spin_ms + 1.0));
  }
  return absl::FailedPreconditionError(
      "timing device work: the host never queued it ahead of the device (does the work wait for the device?)");
}
#endif

}  // namespace

absl::StatusOr<double> DeviceSeconds(c10::Device device, const std::function<absl::Status()>& queue) {
  try {
#ifdef SPECLAB_WITH_CUDA
    if (device.is_cuda()) return CudaSeconds(device, queue);
#endif
    return HostSeconds(queue);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("timing device work: ", ErrorText(e)));
  }
}

absl::StatusOr<double> MedianDeviceSeconds(c10::Device device, const std::function<absl::Status()>& queue) {
  constexpr int kCudaWindows = 5;
  std::vector<double> windows;
  for (int w = 0; w < (device.is_cuda() ? kCudaWindows : 1); ++w) {
    ASSIGN_OR_RETURN(double seconds, DeviceSeconds(device, queue));
    windows.push_back(seconds);
  }
  std::nth_element(windows.begin(), windows.begin() + windows.size() / 2, windows.end());
  return windows[windows.size() / 2];
}

}  // namespace speclab
