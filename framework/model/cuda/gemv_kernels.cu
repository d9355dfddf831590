// The decode GEMV kernels (see decode_kernels.h for the contract): a SIMT
// kernel for one token and a tensor-core kernel for a few.
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

// --- Decode GEMV -------------------------------------------------------------
//
// Both kernels give each block a few weight rows and split k into contiguous
// slices over the block's warps: a warp streams its slice of every row it
// owns, keeps fp32 partial sums in registers, and the block adds the warps'
// partials in shared memory (in warp order: deterministic) before the bias and
// the one rounding. The grid is one block per group of rows; the launcher sizes
// the blocks (warps splitting k) so that small n still gives every SM enough
// loads in flight, and large n gets blocks small enough to balance.
//
// Rows past n and x rows past m are never predicated off: their loads re-read
// the last valid row instead. Output (row, token) depends only on weight row
// `row` and x row `token`, so the duplicates feed only outputs that are never
// stored, and the inner loops stay free of bounds checks.

constexpr int kGemvMaxWarps = 16;

// Tensor-core kernel: 16 weight rows per block (the MMA's M), k in steps of 32
// (4 lanes x 8 elements per row, two MMAs of k = 16), kGemvMmaUnroll steps of
// loads issued before the first MMA consumes them.
constexpr int kGemvMmaRows = 16;
constexpr int kGemvMmaStep = 32;
constexpr int kGemvMmaUnroll = 4;

// SIMT kernel: 4 weight rows per block, k in chunks of 256 (32 lanes x 8),
// two chunks of loads in flight (8 x 16 bytes per lane).
constexpr int kGemvSimtRows = 4;
constexpr int kGemvSimtChunk = 256;
constexpr int kGemvSimtUnroll = 2;
constexpr int kGemvSimtMaxTokens = 4;

// A weight load: 16 bytes that this kernel reads exactly once. The non-coherent
// path with no L1 allocation keeps x (re-read by every warp) resident in L1,
// and the 256-byte L2 prefetch hint makes DRAM fetch whole 256-byte runs of
// the row although one warp instruction touches only 64 bytes of each row.
__device__ __forceinline__ uint4 LoadWeight(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ int64_t MinIndex(int64_t a, int64_t b) { return a < b ? a : b; }

// An x load: tiny, re-read by every block, so cached normally.
__device__ __forceinline__ uint4 LoadInput(const void* p) { return __ldg(static_cast<const uint4*>(p)); }

// One 32-wide k step of the tensor-core kernel for lane (g = lane / 4,
// t = lane % 4). The lane holds 8 consecutive elements k0 + 8t .. k0 + 8t + 7
// of weight rows g (lo) and g + 8 (hi) and of x rows g + 8j (b[j]).
//
// m16n8k16 gives lane (g, t) the A elements (g, 2t..2t+1), (g+8, 2t..2t+1),
// (g, 2t+8..2t+9), (g+8, 2t+8..2t+9) and the B elements (2t..2t+1, g),
// (2t+8..2t+9, g). A and B share their k index, and a dot product does not care
// which k is which, so any relabelling of k applied to both is exact: MMA k
// slots 2t, 2t+1, 2t+8, 2t+9 take our elements 0..3 in the first MMA and 4..7
// in the second. Each 16-byte load is then already in fragment order (32-bit
// word i holds elements 2i, 2i+1, low half first, as the MMA expects).
//
// The accumulator d[j] holds, for token columns 2t, 2t+1 of tile j:
// d[j][0..1] = rows g, d[j][2..3] = rows g + 8.
template <typename T, int kTokenTiles>
__device__ __forceinline__ void MmaStep(float (&d)[kTokenTiles][4], const uint4& lo, const uint4& hi,
                                        const uint4 (&b)[kTokenTiles]) {
#pragma unroll
  for (int j = 0; j < kTokenTiles; ++j) {
    Mma16x8x16<T>(d[j], lo.x, hi.x, lo.y, hi.y, b[j].x, b[j].y);
    Mma16x8x16<T>(d[j], lo.z, hi.z, lo.w, hi.w, b[j].z, b[j].w);
  }
}

// This warp's contiguous share [begin, end) of `units` units of k.
__device__ __forceinline__ void WarpSlice(int64_t units, int64_t* begin, int64_t* end) {
  const int64_t warp = threadIdx.x / kWarpSize, warps = blockDim.x / kWarpSize;
  *begin = units * warp / warps;
  *end = units * (warp + 1) / warps;
}

// Adds the warps' partial sums partial[warp][token][row] of this block's
// `rows` weight rows starting at row0, adds the bias and stores y. Consecutive
// threads take consecutive rows, so each token's stores are contiguous.
template <typename T, int kRows, int kTokens>
__device__ __forceinline__ void GemvEpilogue(const float (&partial)[kGemvMaxWarps][kTokens][kRows],
                                             const T* __restrict__ bias, T* __restrict__ y, int m, int64_t n,
                                             int64_t row0) {
  __syncthreads();
  const int warps = blockDim.x / kWarpSize;
  for (int o = threadIdx.x; o < m * kRows; o += blockDim.x) {
    const int token = o / kRows, r = o % kRows;
    const int64_t row = row0 + r;
    if (row >= n) continue;
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += partial[w][token][r];
    if (bias != nullptr) sum += ToFloat(bias[row]);
    y[token * n + row] = FromFloat<T>(sum);
  }
}

// Block = 16 weight rows x (blockDim.x / 32) warps splitting k. kTokenTiles
// MMA n-tiles of 8 x rows each (1 for m <= 8, 2 for m <= 16).
template <typename T, int kTokenTiles>
__global__ void __launch_bounds__(kGemvMaxWarps* kWarpSize)
    GemvMmaKernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                  T* __restrict__ y, int m, int64_t n, int64_t k) {
  constexpr int kTokens = 8 * kTokenTiles;
  __shared__ float partial[kGemvMaxWarps][kTokens][kGemvMmaRows];
  const int lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kGemvMmaRows;

  const T* w_lo = weight + MinIndex(row0 + g, n - 1) * k + 8 * t;
  const T* w_hi = weight + MinIndex(row0 + g + 8, n - 1) * k + 8 * t;
  const T* x_row[kTokenTiles];
#pragma unroll
  for (int j = 0; j < kTokenTiles; ++j) x_row[j] = x + MinIndex(g + 8 * j, m - 1) * k + 8 * t;

  float d[kTokenTiles][4] = {};
  const int64_t full_steps = k / kGemvMmaStep;
  int64_t s, s_end;
  WarpSlice(full_steps, &s, &s_end);
  // All loads of kGemvMmaUnroll steps first, then their MMAs: the loads'
  // latency overlaps, which is what keeps enough bytes in flight.
  for (; s + kGemvMmaUnroll <= s_end; s += kGemvMmaUnroll) {
    uint4 lo[kGemvMmaUnroll], hi[kGemvMmaUnroll], b[kGemvMmaUnroll][kTokenTiles];
#pragma unroll
    for (int u = 0; u < kGemvMmaUnroll; ++u) {
      const int64_t offset = (s + u) * kGemvMmaStep;
      lo[u] = LoadWeight(w_lo + offset);
      hi[u] = LoadWeight(w_hi + offset);
#pragma unroll
      for (int j = 0; j < kTokenTiles; ++j) b[u][j] = LoadInput(x_row[j] + offset);
    }
#pragma unroll
    for (int u = 0; u < kGemvMmaUnroll; ++u) MmaStep<T, kTokenTiles>(d, lo[u], hi[u], b[u]);
  }
  for (; s < s_end; ++s) {
    const int64_t offset = s * kGemvMmaStep;
    uint4 b[kTokenTiles];
#pragma unroll
    for (int j = 0; j < kTokenTiles; ++j) b[j] = LoadInput(x_row[j] + offset);
    MmaStep<T, kTokenTiles>(d, LoadWeight(w_lo + offset), LoadWeight(w_hi + offset), b);
  }
  // k % 32 != 0 (k is a multiple of 8): the last warp adds a partial step in
  // which lanes past k contribute zeros (their loads could leave the matrix).
  const int64_t offset = full_steps * kGemvMmaStep;
  if (offset < k && threadIdx.x / kWarpSize == blockDim.x / kWarpSize - 1) {
    const bool live = offset + 8 * t < k;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    uint4 b[kTokenTiles];
#pragma unroll
    for (int j = 0; j < kTokenTiles; ++j) b[j] = live ? LoadInput(x_row[j] + offset) : zero;
    MmaStep<T, kTokenTiles>(d, live ? LoadWeight(w_lo + offset) : zero, live ? LoadWeight(w_hi + offset) : zero, b);
  }

  const int warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int j = 0; j < kTokenTiles; ++j) {
    partial[warp][8 * j + 2 * t][g] = d[j][0];
    partial[warp][8 * j + 2 * t + 1][g] = d[j][1];
    partial[warp][8 * j + 2 * t][g + 8] = d[j][2];
    partial[warp][8 * j + 2 * t + 1][g + 8] = d[j][3];
  }
  GemvEpilogue<T, kGemvMmaRows, kTokens>(partial, bias, y, m, n, row0);
}

// Two consecutive 16-bit elements (one 32-bit word, low half first) as floats.
template <typename T>
__device__ __forceinline__ float2 Unpack2(uint32_t word);

template <>
__device__ __forceinline__ float2 Unpack2<__nv_bfloat16>(uint32_t word) {
  // A bfloat16 is the top half of the float with the same value.
  return make_float2(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
}

template <>
__device__ __forceinline__ float2 Unpack2<__half>(uint32_t word) {
  __half2 h;
  memcpy(&h, &word, sizeof(h));
  return __half22float2(h);
}

// acc[j] += dot(w, x[j]) over one 16-byte pack (8 elements) each.
template <typename T, int kTokens>
__device__ __forceinline__ void SimtPackFma(float (&acc)[kTokens], const uint4& w, const uint4 (&x)[kTokens]) {
  const uint32_t w_words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 wf = Unpack2<T>(w_words[i]);
#pragma unroll
    for (int j = 0; j < kTokens; ++j) {
      const uint32_t x_words[4] = {x[j].x, x[j].y, x[j].z, x[j].w};
      const float2 xf = Unpack2<T>(x_words[i]);
      acc[j] = fmaf(wf.x, xf.x, acc[j]);
      acc[j] = fmaf(wf.y, xf.y, acc[j]);
    }
  }
}

// Block = 4 weight rows x (blockDim.x / 32) warps splitting k; each lane
// takes 8 consecutive elements of every 256-element chunk, so one warp load
// covers 512 contiguous bytes of a row. kTokens >= m rows of x.
template <typename T, int kTokens>
__global__ void __launch_bounds__(kGemvMaxWarps* kWarpSize)
    GemvSimtKernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                   T* __restrict__ y, int m, int64_t n, int64_t k) {
  __shared__ float partial[kGemvMaxWarps][kTokens][kGemvSimtRows];
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kGemvSimtRows;

  const T* w_row[kGemvSimtRows];
#pragma unroll
  for (int r = 0; r < kGemvSimtRows; ++r) w_row[r] = weight + MinIndex(row0 + r, n - 1) * k + 8 * lane;
  const T* x_row[kTokens];
#pragma unroll
  for (int j = 0; j < kTokens; ++j) x_row[j] = x + MinIndex(j, m - 1) * k + 8 * lane;

  float acc[kGemvSimtRows][kTokens] = {};
  const int64_t full_chunks = k / kGemvSimtChunk;
  int64_t c, c_end;
  WarpSlice(full_chunks, &c, &c_end);
  for (; c + kGemvSimtUnroll <= c_end; c += kGemvSimtUnroll) {
    uint4 w[kGemvSimtUnroll][kGemvSimtRows], xv[kGemvSimtUnroll][kTokens];
#pragma unroll
    for (int u = 0; u < kGemvSimtUnroll; ++u) {
      const int64_t offset = (c + u) * kGemvSimtChunk;
#pragma unroll
      for (int r = 0; r < kGemvSimtRows; ++r) w[u][r] = LoadWeight(w_row[r] + offset);
#pragma unroll
      for (int j = 0; j < kTokens; ++j) xv[u][j] = LoadInput(x_row[j] + offset);
    }
#pragma unroll
    for (int u = 0; u < kGemvSimtUnroll; ++u) {
#pragma unroll
      for (int r = 0; r < kGemvSimtRows; ++r) SimtPackFma<T, kTokens>(acc[r], w[u][r], xv[u]);
    }
  }
  for (; c < c_end; ++c) {
    const int64_t offset = c * kGemvSimtChunk;
    uint4 xv[kTokens];
#pragma unroll
    for (int j = 0; j < kTokens; ++j) xv[j] = LoadInput(x_row[j] + offset);
#pragma unroll
    for (int r = 0; r < kGemvSimtRows; ++r) SimtPackFma<T, kTokens>(acc[r], LoadWeight(w_row[r] + offset), xv);
  }
  // The last warp takes k's partial chunk; lanes past k skip it.
  const int64_t offset = full_chunks * kGemvSimtChunk;
  if (offset + 8 * lane < k && threadIdx.x / kWarpSize == blockDim.x / kWarpSize - 1) {
    uint4 xv[kTokens];
#pragma unroll
    for (int j = 0; j < kTokens; ++j) xv[j] = LoadInput(x_row[j] + offset);
#pragma unroll
    for (int r = 0; r < kGemvSimtRows; ++r) SimtPackFma<T, kTokens>(acc[r], LoadWeight(w_row[r] + offset), xv);
  }

  const int warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int r = 0; r < kGemvSimtRows; ++r) {
#pragma unroll
    for (int j = 0; j < kTokens; ++j) {
      const float sum = WarpSum(acc[r][j]);
      if (lane == 0) partial[warp][j][r] = sum;
    }
  }
  GemvEpilogue<T, kGemvSimtRows, kTokens>(partial, bias, y, m, n, row0);
}


// Warps per block: enough that the grid holds about kGemvTargetWarpsPerSm
// warps per SM (each warp keeps about 4 KB of loads in flight; 16 such warps
// an SM cover DRAM latency at full bandwidth), as a power of two in
// [kGemvMinWarps, 16], but no more warps than k has units (32-wide steps or
// 256-wide chunks) to give each one at least one.
//
// Measured on an H200 at m = 1 (2048 <= n <= 6144, 2048 <= k <= 14336), the
// choice was the fastest of 2, 4, 8 and 16 warps or within 1% of it for both
// kernels, and so it was for the tensor-core kernel at m = 2..8 (build-
// fusedcheck/gemv_bench.cc). Capping by full unrolled batches instead of units
// cost up to 10% on k = 2048.
constexpr int kGemvTargetWarpsPerSm = 16;
constexpr int kGemvMinWarps = 2;

int GemvWarpsPerBlock(int64_t blocks, int64_t k_units) {
  const int64_t wanted = (static_cast<int64_t>(MultiprocessorCount()) * kGemvTargetWarpsPerSm + blocks - 1) / blocks;
  int warps = kGemvMinWarps;
  while (warps < kGemvMaxWarps && warps < wanted) warps *= 2;
  while (warps > 1 && k_units < warps) warps /= 2;
  return warps;
}

template <typename T>
int RunGemv(const void* x, const void* weight, const void* bias, void* y, int m, int64_t n, int64_t k,
            GemvKernel kernel, int warps, cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  const T* wt = static_cast<const T*>(weight);
  const T* bt = static_cast<const T*>(bias);
  T* yt = static_cast<T*>(y);
  if (kernel == GemvKernel::kSimt) {
    const int64_t blocks = (n + kGemvSimtRows - 1) / kGemvSimtRows;
    if (warps == 0) warps = GemvWarpsPerBlock(blocks, k / kGemvSimtChunk);
    const dim3 grid(static_cast<unsigned int>(blocks)), block(warps * kWarpSize);
    switch (m) {
      case 1:
        GemvSimtKernel<T, 1><<<grid, block, 0, stream>>>(xt, wt, bt, yt, m, n, k);
        break;
      case 2:
        GemvSimtKernel<T, 2><<<grid, block, 0, stream>>>(xt, wt, bt, yt, m, n, k);
        break;
      default:
        GemvSimtKernel<T, kGemvSimtMaxTokens><<<grid, block, 0, stream>>>(xt, wt, bt, yt, m, n, k);
        break;
    }
  } else {
    const int64_t blocks = (n + kGemvMmaRows - 1) / kGemvMmaRows;
    if (warps == 0) warps = GemvWarpsPerBlock(blocks, k / kGemvMmaStep);
    const dim3 grid(static_cast<unsigned int>(blocks)), block(warps * kWarpSize);
    if (m <= 8) {
      GemvMmaKernel<T, 1><<<grid, block, 0, stream>>>(xt, wt, bt, yt, m, n, k);
    } else {
      GemvMmaKernel<T, 2><<<grid, block, 0, stream>>>(xt, wt, bt, yt, m, n, k);
    }
  }
  return static_cast<int>(cudaGetLastError());
}

// Which kernel kAuto runs for m rows. At m = 1 the SIMT kernel streamed 2 to
// 17% faster than the tensor-core one for n <= 6144, and was level (within 1%)
// or faster above (H200, bf16, the Llama 3 1B/8B shapes); a guess at why: its
// warp load takes 512 contiguous bytes of one row where the MMA layout takes
// 64 bytes of each of 8 rows. From m = 2 on, the tensor-core kernel, whose
// arithmetic does not grow with m (SIMT at m = 2..4 was not measured).
GemvKernel ChooseGemvKernel(int64_t m) { return m == 1 ? GemvKernel::kSimt : GemvKernel::kTensorCore; }

}  // namespace

bool GemvSupported(DType dtype, const void* x, const void* weight, int64_t m, int64_t n, int64_t k) {
  return (dtype == DType::kBF16 || dtype == DType::kF16) && m >= 1 && m <= kGemvMaxRows && n >= 1 &&
         n <= kMaxGridX * kGemvSimtRows && k >= 8 && k % 8 == 0 && Aligned(x) && Aligned(weight);
}

int LaunchGemv(DType dtype, const void* x, const void* weight, const void* bias, void* y, int64_t m, int64_t n,
               int64_t k, void* stream, GemvKernel kernel, int warps_per_block) {
  if (!GemvSupported(dtype, x, weight, m, n, k) || warps_per_block < 0 || warps_per_block > kGemvMaxWarps) {
    return cudaErrorInvalidValue;
  }
  if (kernel == GemvKernel::kAuto) kernel = ChooseGemvKernel(m);
  if (kernel == GemvKernel::kSimt && m > kGemvSimtMaxTokens) return cudaErrorInvalidValue;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int rows = static_cast<int>(m);
  return dtype == DType::kBF16
             ? RunGemv<__nv_bfloat16>(x, weight, bias, y, rows, n, k, kernel, warps_per_block, s)
             : RunGemv<__half>(x, weight, bias, y, rows, n, k, kernel, warps_per_block, s);
}

}  // namespace decode_kernels
}  // namespace speclab
