// What the decode kernels share (not part of the API): element conversions,
// 16-byte packs, warp and block reductions, the tensor-core MMA, and the
// device's attributes.
// Included by norm_rope_kernels.cu, gemv_kernels.cu and attention_kernels.cu.
#ifndef SPECLAB_FRAMEWORK_MODEL_CUDA_KERNEL_SUPPORT_CUH_
#define SPECLAB_FRAMEWORK_MODEL_CUDA_KERNEL_SUPPORT_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace speclab {
namespace decode_kernels {
namespace support {


constexpr int kVectorBytes = 16;
constexpr int kWarpSize = 32;

// --- Element conversions -----------------------------------------------------

template <typename T>
struct Convert;

template <>
struct Convert<float> {
  static __device__ __forceinline__ float ToFloat(float v) { return v; }
  static __device__ __forceinline__ float FromFloat(float v) { return v; }
};

template <>
struct Convert<__nv_bfloat16> {
  static __device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
  // Round to nearest even, as c10::BFloat16's float constructor.
  static __device__ __forceinline__ __nv_bfloat16 FromFloat(float v) { return __float2bfloat16(v); }
};

template <>
struct Convert<__half> {
  static __device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }
  // Round to nearest even, as c10::Half's float constructor.
  static __device__ __forceinline__ __half FromFloat(float v) { return __float2half(v); }
};

template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  return Convert<T>::ToFloat(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v) {
  return Convert<T>::FromFloat(v);
}

// The value an ATen op would store in a T tensor: fp32 rounded to T and back.
template <typename T>
__device__ __forceinline__ float RoundTo(float v) {
  return ToFloat(FromFloat<T>(v));
}

// --- Packs -------------------------------------------------------------------

// N consecutive elements, aligned to their size so that a 16-byte pack moves
// with one 128-bit load or store.
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> LoadPack(const T* p) {
  return *reinterpret_cast<const Pack<T, N>*>(p);
}

template <typename T, int N>
__device__ __forceinline__ void StorePack(T* p, const Pack<T, N>& pack) {
  *reinterpret_cast<Pack<T, N>*>(p) = pack;
}

// Elements of T per 16-byte vector.
template <typename T>
constexpr int kWidePack = kVectorBytes / static_cast<int>(sizeof(T));

inline bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }

// --- Reductions --------------------------------------------------------------

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block, returned to every thread. blockDim.x must be a multiple
// of 32. Each warp writes one word and then every warp reduces all of them
// (lane i reads word i: no bank conflicts), which saves a second barrier and
// a broadcast. Uses its shared buffer once: callable once per kernel.
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float warp_sums[kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  v = WarpSum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  return WarpSum(lane < warps ? warp_sums[lane] : 0.0f);
}

// --- Tensor-core MMA (GEMV and attention) -----------------------------------

// d = a (16 x 16, row-major) * b (16 x 8, column-major) + d, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void Mma16x8x16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                           uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void Mma16x8x16<__nv_bfloat16>(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                          uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void Mma16x8x16<__half>(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                   uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

constexpr int64_t kMaxGridX = 0x7fffffff;

// Multiprocessors of the current device, read once per device (the attribute
// query is cheap but not free, and this runs once per linear layer).
inline int MultiprocessorCount() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 132;
  int count = cached[device].load(std::memory_order_relaxed);
  if (count == 0) {
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0) {
      count = 132;
    }
    cached[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

// Shared memory per SM of the current device, read once per device.
inline int SharedMemoryPerMultiprocessor() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 233472;
  int bytes = cached[device].load(std::memory_order_relaxed);
  if (bytes == 0) {
    if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device) != cudaSuccess ||
        bytes <= 0) {
      bytes = 233472;
    }
    cached[device].store(bytes, std::memory_order_relaxed);
  }
  return bytes;
}

}  // namespace support
}  // namespace decode_kernels
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_KERNEL_SUPPORT_CUH_
