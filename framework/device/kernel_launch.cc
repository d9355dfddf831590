#include "framework/device/kernel_launch.h"

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "framework/model/cuda/decode_kernels.h"
#endif

namespace speclab::kernel_launch {
namespace {

std::atomic<int64_t>& LaunchCounter() {
  static std::atomic<int64_t> launches{0};
  return launches;
}

std::atomic<bool>& EnabledFlag() {
  static std::atomic<bool> enabled{[] {
    const char* env = std::getenv("SPECLAB_FUSED_KERNELS");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }()};
  return enabled;
}

bool TakesFloat(const at::Tensor& x) {
  return Enabled() && x.defined() && x.is_cuda() && x.scalar_type() == at::kFloat && x.is_contiguous() &&
         !(c10::GradMode::is_enabled() && x.requires_grad());
}

}  // namespace

bool Enabled() { return EnabledFlag().load(); }

void SetEnabled(bool enabled) { EnabledFlag().store(enabled); }

int64_t Launches() { return LaunchCounter().load(std::memory_order_relaxed); }

bool FloatRows(const at::Tensor& x) {
  return TakesFloat(x) && x.dim() == 2 && x.size(0) >= 1 && x.size(0) <= 65535 && x.size(1) >= 1;
}

bool FloatVector(const at::Tensor& x) { return TakesFloat(x) && x.dim() == 1 && x.size(0) >= 1; }

bool Longs(const at::Tensor& x) {
  return Enabled() && x.defined() && x.is_cuda() && x.scalar_type() == at::kLong && x.is_contiguous();
}

void* Stream(const at::Tensor& on) {
#ifdef SPECLAB_WITH_CUDA
  return c10::cuda::getCurrentCUDAStream(on.device().index()).stream();
#else
  (void)on;
  return nullptr;
#endif
}

void Check(int cuda_error, const char* op) {
#ifdef SPECLAB_WITH_CUDA
  TORCH_CHECK(cuda_error == 0, "speclab ", op, " kernel: ", decode_kernels::DecodeKernelErrorString(cuda_error));
#else
  TORCH_CHECK(cuda_error == 0, "speclab ", op, " kernel: CUDA error ", cuda_error);
#endif
  LaunchCounter().fetch_add(1, std::memory_order_relaxed);
}

absl::Status LaunchOn(c10::Device device, const char* op, absl::FunctionRef<int(void* stream)> launch) {
#ifdef SPECLAB_WITH_CUDA
  if (!device.is_cuda())
    return absl::InvalidArgumentError(absl::StrCat(op, ": a CUDA kernel, asked on ", device.str()));
  const c10::cuda::CUDAGuard guard(device);
  const int error = launch(c10::cuda::getCurrentCUDAStream(device.index()).stream());
  if (error != 0)
    return absl::InternalError(
        absl::StrCat(op, ": kernel launch failed (", decode_kernels::DecodeKernelErrorString(error), ")"));
  LaunchCounter().fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
#else
  (void)launch;
  return absl::UnimplementedError(absl::StrCat(op, ": this build has no CUDA (", device.str(), ")"));
#endif
}

}  // namespace speclab::kernel_launch
