// Fused decode kernels; see decode_kernels.h for the contract.
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
#include <cstdint>
#include <cstring>

namespace speclab {
namespace decode_kernels {
namespace {

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

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; }

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

// Multiprocessors of the current device, read once per device (the attribute
// query is cheap but not free, and this runs once per linear layer).
int MultiprocessorCount() {
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

constexpr int64_t kMaxGridX = 0x7fffffff;

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
