// Fused CUDA kernels for batch-1 decoding of a Llama layer.
//
// At batch 1 a layer is bound by kernel launches, not by bandwidth: the ATen
// composition of RMSNorm, RoPE, the KV-cache writes and SiLU-and-multiply is
// ~30 small kernels. These replace each of those groups with one launch.
//
// This header (and decode_kernels.cu) deliberately know nothing of torch or of
// the CUDA headers: nvcc compiles the .cu alone, fast, and free of torch's
// header quirks. framework/model/fused_ops.h wraps them for at::Tensor.
//
// Conventions shared by every launcher:
//  - pointers are device pointers to contiguous data of element type `dtype`;
//  - `stream` is a cudaStream_t; the launch is asynchronous, allocates nothing
//    and never synchronises, so it may be captured into a CUDA graph;
//  - the return value is a cudaError_t (0 == cudaSuccess) from the launch;
//    DecodeKernelErrorString() turns it into text;
//  - the arithmetic reproduces the ATen formulas in fused_ops.h step by step,
//    rounding to `dtype` where ATen materialises an intermediate tensor, so
//    results match ATen's bit for bit up to the order of the fp32 sum in RMSNorm.
#ifndef SPECLAB_FRAMEWORK_MODEL_CUDA_DECODE_KERNELS_H_
#define SPECLAB_FRAMEWORK_MODEL_CUDA_DECODE_KERNELS_H_

#include <cstdint>

namespace speclab {
namespace decode_kernels {

enum class DType : int { kF32 = 0, kBF16 = 1, kF16 = 2 };

// Text for an error code returned by the launchers (cudaGetErrorString).
const char* DecodeKernelErrorString(int error);

// Row-wise (optionally residual-add then) RMSNorm over `rows` rows of `hidden`:
//   sum = x + delta                      (rounded to dtype; only if delta != nullptr)
//   out = weight * (float(sum) * rsqrt(mean(float(sum)^2) + eps)).to(dtype)
// With delta == nullptr, sum_out is ignored and `x` is normalised; otherwise
// sum_out receives `sum`. One block per row.
int LaunchAddRmsNorm(DType dtype, const void* x, const void* delta, const void* weight, void* sum_out, void* out,
                     int64_t rows, int64_t hidden, float eps, void* stream);

// out[r][i] = silu(gate_up[r][i]) * gate_up[r][intermediate + i] for
// gate_up [rows, 2 * intermediate] and out [rows, intermediate]; silu's
// result is rounded to dtype before the multiply, as ATen's two kernels do.
int LaunchSiluMul(DType dtype, const void* gate_up, void* out, int64_t rows, int64_t intermediate, void* stream);

// RoPE (HF rotate_half) on the q and k heads of a fused projection, K/V into
// the cache, q into the grouped layout attention reads. Shapes:
//   qkv          [n, (heads + 2 * kv_heads) * head_dim]  q heads, k heads, v heads
//   cos, sin     [n, head_dim]
//   write_slots  [n] int64: the cache slot of each token; tokens whose slot is
//                outside [0, cache_slots) are not written (ATen would assert)
//   q_out        [heads, n, head_dim] == [kv_heads, group * n, head_dim] with
//                q_out[kv][j * n + t] = rope(q)[t][kv * group + j]
//   k_cache, v_cache  [kv_heads, cache_slots, head_dim]
// head_dim must be even.
int LaunchRopeQkvToCache(DType dtype, const void* qkv, const void* cos, const void* sin, const int64_t* write_slots,
                         void* q_out, void* k_cache, void* v_cache, int64_t n, int64_t heads, int64_t kv_heads,
                         int64_t head_dim, int64_t cache_slots, void* stream);

}  // namespace decode_kernels
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_DECODE_KERNELS_H_
