// Fused decode kernels (see decode_kernels.h for the contract): (add +)
// RMSNorm, SiLU(gate) * up, RoPE with the KV-cache write, RoPE angles.
//
// Numerics: every kernel computes in fp32 and rounds to the storage type
// exactly where the ATen composition it replaces materialises a tensor, with
// the same fp32 functions ATen's CUDA kernels call (rsqrtf, expf, IEEE
// division). Multiplies that ATen runs as separate kernels use __fmul_rn so
// that nvcc cannot contract them with a following add into an FMA (which
// would round once where ATen rounds twice). Hence RoPE and SiLU-mul match
// ATen bit for bit; RMSNorm differs only by the order of its fp32 sum.
//
// Memory access: 16-byte vectors ("packs") whenever the base pointers are
// 16-byte aligned and the row/half-head lengths are multiples of a pack;
// otherwise the same kernels run with one element per pack.
#include "framework/model/cuda/decode_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "framework/model/cuda/kernel_support.cuh"

namespace speclab {
namespace decode_kernels {
namespace {

using namespace support;  // NOLINT: the kernels' shared vocabulary

// --- (Add +) RMSNorm ---------------------------------------------------------

// One block per row. The row is read twice (sum of squares, then scale); the
// second read hits L1/L2, and recomputing x + delta there instead of reading
// sum_out back keeps every input read-only for the kernel's lifetime.
template <typename T, int N, bool kAdd>
__global__ void AddRmsNormKernel(const T* __restrict__ x, const T* __restrict__ delta, const T* __restrict__ weight,
                                 T* __restrict__ sum_out, T* __restrict__ out, int64_t hidden, float eps,
                                 float inv_hidden) {
  const int64_t row_offset = static_cast<int64_t>(blockIdx.x) * hidden;
  const int64_t packs = hidden / N;

  // Loads pack i of this row's residual sum (x + delta rounded to T, as ATen's add).
  auto load_sum = [&](int64_t i) {
    Pack<T, N> a = LoadPack<T, N>(x + row_offset + i * N);
    if constexpr (kAdd) {
      const Pack<T, N> b = LoadPack<T, N>(delta + row_offset + i * N);
#pragma unroll
      for (int k = 0; k < N; ++k) a.v[k] = FromFloat<T>(ToFloat(a.v[k]) + ToFloat(b.v[k]));
    }
    return a;
  };

  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const Pack<T, N> a = load_sum(i);
    if constexpr (kAdd) StorePack<T, N>(sum_out + row_offset + i * N, a);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float f = ToFloat(a.v[k]);
      sum_sq += __fmul_rn(f, f);  // ATen squares into a tensor, then sums
    }
  }
  // mean = sum * (1 / hidden) as ATen's MeanOps; the add of eps is its own op.
  const float variance = __fmul_rn(BlockSum(sum_sq), inv_hidden);
  const float r = rsqrtf(variance + eps);

  for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
    const Pack<T, N> a = load_sum(i);
    const Pack<T, N> w = LoadPack<T, N>(weight + i * N);
    Pack<T, N> o;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      // weight * (x * r).to(T): the normalised value is rounded before the scale.
      o.v[k] = FromFloat<T>(__fmul_rn(ToFloat(w.v[k]), RoundTo<T>(__fmul_rn(ToFloat(a.v[k]), r))));
    }
    StorePack<T, N>(out + row_offset + i * N, o);
  }
}

template <typename T, int N, bool kAdd>
int RunAddRmsNorm(const void* x, const void* delta, const void* weight, void* sum_out, void* out, int64_t rows,
                  int64_t hidden, float eps, cudaStream_t stream) {
  const int64_t packs = hidden / N;
  // Enough warps to cover the row in one pass up to 512 threads; more packs
  // loop. Multiple of 32 for BlockSum.
  const int threads = static_cast<int>(std::min<int64_t>(512, std::max<int64_t>(kWarpSize, (packs + 31) / 32 * 32)));
  AddRmsNormKernel<T, N, kAdd><<<static_cast<unsigned int>(rows), threads, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(delta), static_cast<const T*>(weight), static_cast<T*>(sum_out),
      static_cast<T*>(out), hidden, eps, 1.0f / static_cast<float>(hidden));
  return static_cast<int>(cudaGetLastError());
}

template <typename T, bool kAdd>
int LaunchAddRmsNormTyped(const void* x, const void* delta, const void* weight, void* sum_out, void* out, int64_t rows,
                          int64_t hidden, float eps, cudaStream_t stream) {
  constexpr int kWide = kWidePack<T>;
  const bool wide = hidden % kWide == 0 && Aligned(x) && Aligned(weight) && Aligned(out) &&
                    (!kAdd || (Aligned(delta) && Aligned(sum_out)));
  return wide ? RunAddRmsNorm<T, kWide, kAdd>(x, delta, weight, sum_out, out, rows, hidden, eps, stream)
              : RunAddRmsNorm<T, 1, kAdd>(x, delta, weight, sum_out, out, rows, hidden, eps, stream);
}

template <typename T>
int LaunchAddRmsNormDispatch(const void* x, const void* delta, const void* weight, void* sum_out, void* out,
                             int64_t rows, int64_t hidden, float eps, cudaStream_t stream) {
  return delta != nullptr
             ? LaunchAddRmsNormTyped<T, true>(x, delta, weight, sum_out, out, rows, hidden, eps, stream)
             : LaunchAddRmsNormTyped<T, false>(x, nullptr, weight, nullptr, out, rows, hidden, eps, stream);
}

// --- SiLU(gate) * up ---------------------------------------------------------

// Grid-stride over the packs of the output [rows, intermediate].
template <typename T, int N>
__global__ void SiluMulKernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t rows, int64_t intermediate) {
  const int64_t packs_per_row = intermediate / N;
  const int64_t total = rows * packs_per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += stride) {
    const int64_t row = p / packs_per_row;
    const int64_t col = (p - row * packs_per_row) * N;
    const T* gate = gate_up + row * 2 * intermediate + col;
    const Pack<T, N> g = LoadPack<T, N>(gate);
    const Pack<T, N> u = LoadPack<T, N>(gate + intermediate);
    Pack<T, N> o;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float x = ToFloat(g.v[k]);
      // ATen's silu kernel: x / (1 + exp(-x)) in fp32, stored as T; then T * T.
      const float silu = RoundTo<T>(x / (1.0f + expf(-x)));
      o.v[k] = FromFloat<T>(__fmul_rn(silu, ToFloat(u.v[k])));
    }
    StorePack<T, N>(out + row * intermediate + col, o);
  }
}

template <typename T, int N>
int RunSiluMul(const void* gate_up, void* out, int64_t rows, int64_t intermediate, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t total = rows * (intermediate / N);
  // Grid-stride loop past this many blocks; far more than the SMs can hold.
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 65536);
  SiluMulKernel<T, N><<<static_cast<unsigned int>(blocks), kThreads, 0, stream>>>(
      static_cast<const T*>(gate_up), static_cast<T*>(out), rows, intermediate);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int LaunchSiluMulTyped(const void* gate_up, void* out, int64_t rows, int64_t intermediate, cudaStream_t stream) {
  constexpr int kWide = kWidePack<T>;
  const bool wide = intermediate % kWide == 0 && Aligned(gate_up) && Aligned(out);
  return wide ? RunSiluMul<T, kWide>(gate_up, out, rows, intermediate, stream)
              : RunSiluMul<T, 1>(gate_up, out, rows, intermediate, stream);
}

// --- RoPE + KV-cache write + grouped q ---------------------------------------

// blockIdx.x = token; blockIdx.y and the threads stride over the token's work
// items: first one per (q or k head, pack of the first half of head_dim) —
// each rotates a pack from both halves, since rotate_half pairs d with
// d + head_dim / 2 — then one per (v head, pack of head_dim), a plain copy.
template <typename T, int N>
__global__ void RopeQkvToCacheKernel(const T* __restrict__ qkv, const T* __restrict__ cos, const T* __restrict__ sin,
                                     const int64_t* __restrict__ write_slots, T* __restrict__ q_out,
                                     T* __restrict__ k_cache, T* __restrict__ v_cache, int64_t n, int64_t heads,
                                     int64_t kv_heads, int64_t head_dim, int64_t cache_slots) {
  const int64_t t = blockIdx.x;
  const int64_t half = head_dim / 2;
  const int64_t rope_packs_per_head = half / N;
  const int64_t rope_packs = (heads + kv_heads) * rope_packs_per_head;
  const int64_t v_packs_per_head = head_dim / N;
  const int64_t total = rope_packs + kv_heads * v_packs_per_head;

  const T* row = qkv + t * (heads + 2 * kv_heads) * head_dim;
  const T* cos_row = cos + t * head_dim;
  const T* sin_row = sin + t * head_dim;
  const int64_t slot = write_slots[t];
  const bool write_kv = slot >= 0 && slot < cache_slots;

  const int64_t stride = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; p < total; p += stride) {
    if (p < rope_packs) {
      const int64_t head = p / rope_packs_per_head;  // q heads first, then k heads
      const int64_t d = (p - head * rope_packs_per_head) * N;
      T* dst;
      if (head < heads) {
        // q_out is [heads, n, head_dim]: read as [kv_heads, group * n, head_dim]
        // it puts query head kv * group + j at row j * n + t of group kv.
        dst = q_out + (head * n + t) * head_dim + d;
      } else {
        if (!write_kv) continue;
        dst = k_cache + ((head - heads) * cache_slots + slot) * head_dim + d;
      }
      const T* src = row + head * head_dim + d;
      const Pack<T, N> lo = LoadPack<T, N>(src);
      const Pack<T, N> hi = LoadPack<T, N>(src + half);
      const Pack<T, N> cos_lo = LoadPack<T, N>(cos_row + d);
      const Pack<T, N> cos_hi = LoadPack<T, N>(cos_row + half + d);
      const Pack<T, N> sin_lo = LoadPack<T, N>(sin_row + d);
      const Pack<T, N> sin_hi = LoadPack<T, N>(sin_row + half + d);
      Pack<T, N> out_lo, out_hi;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float x_lo = ToFloat(lo.v[k]);
        const float x_hi = ToFloat(hi.v[k]);
        // x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x_hi, x_lo):
        // ATen stores both products as T tensors, then adds them.
        out_lo.v[k] = FromFloat<T>(RoundTo<T>(__fmul_rn(x_lo, ToFloat(cos_lo.v[k]))) +
                                   RoundTo<T>(__fmul_rn(-x_hi, ToFloat(sin_lo.v[k]))));
        out_hi.v[k] = FromFloat<T>(RoundTo<T>(__fmul_rn(x_hi, ToFloat(cos_hi.v[k]))) +
                                   RoundTo<T>(__fmul_rn(x_lo, ToFloat(sin_hi.v[k]))));
      }
      StorePack<T, N>(dst, out_lo);
      StorePack<T, N>(dst + half, out_hi);
    } else {
      if (!write_kv) continue;
      const int64_t q = p - rope_packs;
      const int64_t kv = q / v_packs_per_head;
      const int64_t d = (q - kv * v_packs_per_head) * N;
      StorePack<T, N>(v_cache + (kv * cache_slots + slot) * head_dim + d,
                      LoadPack<T, N>(row + (heads + kv_heads + kv) * head_dim + d));
    }
  }
}

template <typename T, int N>
int RunRopeQkvToCache(const void* qkv, const void* cos, const void* sin, const int64_t* write_slots, void* q_out,
                      void* k_cache, void* v_cache, int64_t n, int64_t heads, int64_t kv_heads, int64_t head_dim,
                      int64_t cache_slots, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const int64_t work = (heads + kv_heads) * (head_dim / 2 / N) + kv_heads * (head_dim / N);
  // Spread one token over several blocks: at n == 1 a single block would
  // leave all but one SM idle.
  const int64_t chunks = std::min<int64_t>((work + kThreads - 1) / kThreads, 65535);
  const dim3 grid(static_cast<unsigned int>(n), static_cast<unsigned int>(chunks));
  RopeQkvToCacheKernel<T, N><<<grid, kThreads, 0, stream>>>(
      static_cast<const T*>(qkv), static_cast<const T*>(cos), static_cast<const T*>(sin), write_slots,
      static_cast<T*>(q_out), static_cast<T*>(k_cache), static_cast<T*>(v_cache), n, heads, kv_heads, head_dim,
      cache_slots);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int LaunchRopeQkvToCacheTyped(const void* qkv, const void* cos, const void* sin, const int64_t* write_slots,
                              void* q_out, void* k_cache, void* v_cache, int64_t n, int64_t heads, int64_t kv_heads,
                              int64_t head_dim, int64_t cache_slots, cudaStream_t stream) {
  constexpr int kWide = kWidePack<T>;
  // Half-head multiples of a pack keep every row, head and half-head start
  // aligned once the base pointers are.
  const bool wide = (head_dim / 2) % kWide == 0 && Aligned(qkv) && Aligned(cos) && Aligned(sin) && Aligned(q_out) &&
                    Aligned(k_cache) && Aligned(v_cache);
  return wide ? RunRopeQkvToCache<T, kWide>(qkv, cos, sin, write_slots, q_out, k_cache, v_cache, n, heads, kv_heads,
                                            head_dim, cache_slots, stream)
              : RunRopeQkvToCache<T, 1>(qkv, cos, sin, write_slots, q_out, k_cache, v_cache, n, heads, kv_heads,
                                        head_dim, cache_slots, stream);
}

template <typename T>
__global__ void RopeAnglesKernel(const int64_t* __restrict__ positions, const float* __restrict__ inv_freq,
                                 T* __restrict__ cos, T* __restrict__ sin, int64_t half) {
  const int64_t t = blockIdx.x;
  const float position = static_cast<float>(positions[t]);
  T* cos_row = cos + t * 2 * half;
  T* sin_row = sin + t * 2 * half;
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
    const float angle = position * inv_freq[j];
    const T c = FromFloat<T>(cosf(angle)), s = FromFloat<T>(sinf(angle));
    cos_row[j] = cos_row[half + j] = c;
    sin_row[j] = sin_row[half + j] = s;
  }
}

template <typename T>
int RunRopeAngles(const int64_t* positions, const float* inv_freq, void* cos, void* sin, int64_t n, int64_t head_dim,
                  cudaStream_t stream) {
  RopeAnglesKernel<T><<<static_cast<unsigned int>(n), 64, 0, stream>>>(positions, inv_freq, static_cast<T*>(cos),
                                                                         static_cast<T*>(sin), head_dim / 2);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

const char* DecodeKernelErrorString(int error) { return cudaGetErrorString(static_cast<cudaError_t>(error)); }

int LaunchAddRmsNorm(DType dtype, const void* x, const void* delta, const void* weight, void* sum_out, void* out,
                     int64_t rows, int64_t hidden, float eps, void* stream) {
  if (rows == 0) return cudaSuccess;
  if (rows < 0 || rows > kMaxGridX || hidden <= 0) return cudaErrorInvalidValue;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kF32:
      return LaunchAddRmsNormDispatch<float>(x, delta, weight, sum_out, out, rows, hidden, eps, s);
    case DType::kBF16:
      return LaunchAddRmsNormDispatch<__nv_bfloat16>(x, delta, weight, sum_out, out, rows, hidden, eps, s);
    case DType::kF16:
      return LaunchAddRmsNormDispatch<__half>(x, delta, weight, sum_out, out, rows, hidden, eps, s);
  }
  return cudaErrorInvalidValue;
}

int LaunchSiluMul(DType dtype, const void* gate_up, void* out, int64_t rows, int64_t intermediate, void* stream) {
  if (rows == 0 || intermediate == 0) return cudaSuccess;
  if (rows < 0 || intermediate < 0) return cudaErrorInvalidValue;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kF32:
      return LaunchSiluMulTyped<float>(gate_up, out, rows, intermediate, s);
    case DType::kBF16:
      return LaunchSiluMulTyped<__nv_bfloat16>(gate_up, out, rows, intermediate, s);
    case DType::kF16:
      return LaunchSiluMulTyped<__half>(gate_up, out, rows, intermediate, s);
  }
  return cudaErrorInvalidValue;
}

int LaunchRopeQkvToCache(DType dtype, const void* qkv, const void* cos, const void* sin, const int64_t* write_slots,
                         void* q_out, void* k_cache, void* v_cache, int64_t n, int64_t heads, int64_t kv_heads,
                         int64_t head_dim, int64_t cache_slots, void* stream) {
  if (n == 0) return cudaSuccess;
  if (n < 0 || n > kMaxGridX || heads <= 0 || kv_heads <= 0 || head_dim <= 0 || head_dim % 2 != 0 ||
      cache_slots < 0) {
    return cudaErrorInvalidValue;
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kF32:
      return LaunchRopeQkvToCacheTyped<float>(qkv, cos, sin, write_slots, q_out, k_cache, v_cache, n, heads, kv_heads,
                                              head_dim, cache_slots, s);
    case DType::kBF16:
      return LaunchRopeQkvToCacheTyped<__nv_bfloat16>(qkv, cos, sin, write_slots, q_out, k_cache, v_cache, n, heads,
                                                      kv_heads, head_dim, cache_slots, s);
    case DType::kF16:
      return LaunchRopeQkvToCacheTyped<__half>(qkv, cos, sin, write_slots, q_out, k_cache, v_cache, n, heads,
                                               kv_heads, head_dim, cache_slots, s);
  }
  return cudaErrorInvalidValue;
}

int LaunchRopeAngles(DType dtype, const int64_t* positions, const float* inv_freq, void* cos, void* sin, int64_t n,
                     int64_t head_dim, void* stream) {
  if (n == 0) return cudaSuccess;
  if (n < 0 || n > kMaxGridX || head_dim <= 0 || head_dim % 2 != 0) return cudaErrorInvalidValue;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kF32: return RunRopeAngles<float>(positions, inv_freq, cos, sin, n, head_dim, s);
    case DType::kBF16: return RunRopeAngles<__nv_bfloat16>(positions, inv_freq, cos, sin, n, head_dim, s);
    case DType::kF16: return RunRopeAngles<__half>(positions, inv_freq, cos, sin, n, head_dim, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace decode_kernels
}  // namespace speclab
