// The framework's side of a plugin's CUDA kernels.
//
// A plugin keeps its kernels in its folder's cuda/ (CMake compiles every .cu
// under algorithms/ and drafters/), behind a torch-free launcher that takes
// device pointers and a stream and returns a cudaError_t as int; its at::Tensor
// wrapper beside it checks shapes, launches where the kernels take the inputs
// and falls back to the ATen formula (the reference) elsewhere. These say
// whether the kernels may run, which tensors they take, on which stream, and
// check and count each launch (fused::CudaKernelLaunches()).
#ifndef SPECLAB_FRAMEWORK_DEVICE_KERNEL_LAUNCH_H_
#define SPECLAB_FRAMEWORK_DEVICE_KERNEL_LAUNCH_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace speclab::kernel_launch {

// The build has CUDA and kernels are enabled (SPECLAB_FUSED_KERNELS unset or
// not "0"; fused::SetCudaKernelsEnabled).
bool Enabled();
void SetEnabled(bool enabled);

// Kernel launches checked so far.
int64_t Launches();

// A float32 [rows, cols] matrix the row kernels take: contiguous, on CUDA,
// 1 <= rows <= 65535, cols >= 1, needing no gradient; false where !Enabled().
bool FloatRows(const at::Tensor& x);
// A float32 [n >= 1] vector the same way.
bool FloatVector(const at::Tensor& x);
// An int64 tensor a kernel takes (indices, tokens, parents): contiguous, on
// CUDA; false where !Enabled().
bool Longs(const at::Tensor& x);

// The current CUDA stream of `on`'s device (a cudaStream_t), for a launcher.
void* Stream(const at::Tensor& on);

// Throws c10::Error naming `op` unless `cuda_error` is cudaSuccess; counts
// the launch.
void Check(int cuda_error, const char* op);

// For launchers whose callers return a Status (drafters' device forms):
// runs `launch` with `device` current, handing it that device's current
// stream, counts the launch, and turns its cudaError_t into an Internal error
// naming `op` and the error. InvalidArgument off CUDA; Unimplemented in a
// build without CUDA.
absl::Status LaunchOn(c10::Device device, const char* op, absl::FunctionRef<int(void* stream)> launch);

}  // namespace speclab::kernel_launch

#endif  // SPECLAB_FRAMEWORK_DEVICE_KERNEL_LAUNCH_H_
