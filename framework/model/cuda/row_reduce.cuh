// Block reductions over wide rows, shared by the row kernels
// (row_kernels.cu) and the verifiers' kernels (algorithms/verifiers/*/cuda/).
#ifndef SPECLAB_FRAMEWORK_MODEL_CUDA_ROW_REDUCE_CUH_
#define SPECLAB_FRAMEWORK_MODEL_CUDA_ROW_REDUCE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "framework/model/cuda/row_kernels.h"

namespace speclab {
namespace row_reduce {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
static_assert(row_kernels::kRowChunk % kThreads == 0, "a chunk is a whole number of block-wide passes");
using row_kernels::kRowChunk;
using row_kernels::RowChunks;

// An argmax candidate as one orderable 64-bit key: the value's bits mapped so
// that unsigned order is numeric order (every NaN above +inf; -0 made +0, its
// equal), then the complemented index, so that the larger key is the larger
// value and, among equal values, the smaller index.
__device__ __forceinline__ uint64_t ArgmaxKey(float v, uint32_t index) {
  uint32_t bits = __float_as_uint(v + 0.0f);  // -0 + 0 = +0
  bits = isnan(v) ? 0xFFFFFFFFu : (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<uint64_t>(bits) << 32) | (0xFFFFFFFFu - index);
}

__device__ __forceinline__ uint64_t MaxKey(uint64_t a, uint64_t b) { return a > b ? a : b; }

// A float64 as an orderable key: unsigned order is numeric order, every NaN
// above +inf, -0 equal to +0 (the tree builders' score rankings).
__device__ __forceinline__ uint64_t OrderKey(double v) {
  if (isnan(v)) return ~uint64_t{0};
  const uint64_t bits = static_cast<uint64_t>(__double_as_longlong(v + 0.0));  // -0 + 0 = +0
  return (bits >> 63) ? ~bits : (bits | (uint64_t{1} << 63));
}

// The block's largest key (valid in every thread); kBlock threads.
template <int kBlock = kThreads>
__device__ __forceinline__ uint64_t BlockMaxKey(uint64_t key) {
  __shared__ uint64_t warp_keys[kBlock / kWarpSize];
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) key = MaxKey(key, __shfl_xor_sync(0xFFFFFFFFu, key, offset));
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  if (lane == 0) warp_keys[warp] = key;
  __syncthreads();
  key = lane < kBlock / kWarpSize ? warp_keys[lane] : 0;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) key = MaxKey(key, __shfl_xor_sync(0xFFFFFFFFu, key, offset));
  __syncthreads();  // warp_keys may be reused by a later call
  return key;
}

// The sum over a block of kBlock threads, valid in every thread.
template <int kBlock = kThreads>
__device__ __forceinline__ float BlockSumAll(float v) {
  __shared__ float warp_sums[kBlock / kWarpSize];
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = lane < kBlock / kWarpSize ? warp_sums[lane] : 0.0f;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  __syncthreads();  // warp_sums may be reused by a later call
  return v;
}

// The sum over a block of kThreads threads.
__device__ __forceinline__ float BlockSum(float v) { return BlockSumAll<kThreads>(v); }

}  // namespace row_reduce
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_ROW_REDUCE_CUH_
