// The decode attention kernels (see decode_kernels.h for the contract): the
// chunked kernel with its combine step, and the split variant (sm_90+).
#include "framework/model/cuda/decode_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
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

// --- Decode attention ----------------------------------------------------------
//
// Grid: (chunks, row blocks, kv_heads). A block of `warps` warps (1..4) owns
// 16 * warps query rows of one KV head (warp w: an m16 MMA tile of rows) and
// walks the 64-slot tiles of its chunk. Per tile:
//   1. the mask bytes of every query token for the tile's slots go to shared
//      memory (4-byte words where alignment allows), and each warp records
//      which slots any token sees; a tile nobody sees ends here;
//   2. the K and V rows of seen slots are copied to shared memory with
//      cp.async (16 bytes each); unseen slots get zeros, never a load;
//   3. each warp: S = Q K^T (m16n8k16, B fragments by ldmatrix), mask by
//      select, running max/sum update (base 2), P rounded to T into A
//      fragments (the C layout of two n-tiles is the A layout of one k-step),
//      acc += P V (ldmatrix.trans for V).
// Shared rows are padded by 16 bytes (kD + 8 elements) so that the eight
// 16-byte rows of each ldmatrix fall in distinct banks.

constexpr int kAttnTile = static_cast<int>(kDecodeAttentionTile);
constexpr int kAttnMaxWarps = 4;
constexpr int kAttnMaskWords = kAttnTile / 4;  // 4 slots per 32-bit word
constexpr int kAttnMaskPitch = kAttnTile + 4;  // bytes per staged mask row (bank spread)
constexpr int kAttnCombineWarps = 4;

struct AttnParams {
  const void* q;
  const void* k;
  const void* v;
  const uint8_t* allowed;
  void* out;       // written directly when chunks == 1
  float* ws_acc;   // [kv_heads][chunks][rows][head_dim]
  float2* ws_ml;   // [kv_heads][chunks][rows]: (running max in log2 units, sum)
  int64_t mask_stride;
  int64_t kv_length;
  int64_t cache_slots;
  int rows;
  int tokens;
  int m_tiles;  // ceil(rows / 16)
  int chunk_tiles;
  int chunks;
  float scale_log2;  // head_dim^-0.5 * log2(e)
  bool mask_words;   // allowed and mask_stride allow aligned 4-byte loads
};

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress(smem)), "l"(gmem) : "memory");
}

__device__ __forceinline__ void CpAsyncWaitAll() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(smem))
               : "memory");
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(smem))
               : "memory");
}

// Two floats rounded to T and packed (a in the low half, as MMA fragments
// order consecutive k); *ra and *rb receive the rounded values.
template <typename T>
__device__ __forceinline__ uint32_t PackRounded(float a, float b, float* ra, float* rb);

template <>
__device__ __forceinline__ uint32_t PackRounded<__nv_bfloat16>(float a, float b, float* ra, float* rb) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  *ra = __low2float(h);
  *rb = __high2float(h);
  uint32_t word;
  memcpy(&word, &h, sizeof(word));
  return word;
}

template <>
__device__ __forceinline__ uint32_t PackRounded<__half>(float a, float b, float* ra, float* rb) {
  const __half2 h = __floats2half2_rn(a, b);
  *ra = __low2float(h);
  *rb = __high2float(h);
  uint32_t word;
  memcpy(&word, &h, sizeof(word));
  return word;
}

// The mask bytes of slots [slot, slot + 4) of one token's row as a word (byte
// i: slot + i; zero past kv_length, which is never read).
__device__ __forceinline__ uint32_t LoadMaskWord(const uint8_t* row, int64_t slot, int64_t kv_length, bool words) {
  if (words && slot + 4 <= kv_length) return __ldg(reinterpret_cast<const unsigned int*>(row + slot));
  uint32_t word = 0;
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    if (slot + b < kv_length && __ldg(row + slot + b) != 0) word |= 1u << (8 * b);
  }
  return word;
}

constexpr float kNegInf = -__builtin_huge_valf();

// The q rows of one 16-row m-tile as mma A fragments, one per 16-wide k-step
// (row-major 16 x 16): a0 (g, 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..),
// a3 (g+8, 2t+8..), where rows g and g + 8 are row_lo and row_hi.
template <typename T, int kD, int kKSteps>
__device__ __forceinline__ void LoadQFragments(const T* q_head, int row_lo, int row_hi, int t,
                                               uint32_t (&qa)[kKSteps][4]) {
  const T* lo = q_head + static_cast<int64_t>(row_lo) * kD + 2 * t;
  const T* hi = q_head + static_cast<int64_t>(row_hi) * kD + 2 * t;
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
    qa[kk][0] = __ldg(reinterpret_cast<const unsigned int*>(lo + kk * 16));
    qa[kk][1] = __ldg(reinterpret_cast<const unsigned int*>(hi + kk * 16));
    qa[kk][2] = __ldg(reinterpret_cast<const unsigned int*>(lo + kk * 16 + 8));
    qa[kk][3] = __ldg(reinterpret_cast<const unsigned int*>(hi + kk * 16 + 8));
  }
}

// The online-softmax step the attention kernels share, over kTiles n-tiles of
// mma scores `s` (rows g and g + 8 of the fragment): masks by selection, so
// that NaN scores of masked slots vanish; scales to log2 units; updates the
// running row maxima m; rescales the sums l and the accumulators by the change
// of maximum; and returns in base_lo / base_hi what P = exp2(s - base) must
// subtract. mask_lo / mask_hi: the two rows' mask bytes for these tiles.
template <int kTiles, int kDTiles>
__device__ __forceinline__ void OnlineSoftmaxStep(float (&s)[kTiles][4], const uint8_t* mask_lo,
                                                  const uint8_t* mask_hi, float scale_log2, float& m_lo, float& m_hi,
                                                  float& l_lo, float& l_hi, float (&acc)[kDTiles][4], float& base_lo,
                                                  float& base_hi) {
  float max_lo = kNegInf, max_hi = kNegInf;
#pragma unroll
  for (int nt = 0; nt < kTiles; ++nt) {
    const uint32_t ok_lo = *reinterpret_cast<const uint16_t*>(mask_lo + nt * 8);
    const uint32_t ok_hi = *reinterpret_cast<const uint16_t*>(mask_hi + nt * 8);
    s[nt][0] = (ok_lo & 0xffu) ? s[nt][0] * scale_log2 : kNegInf;
    s[nt][1] = (ok_lo >> 8) ? s[nt][1] * scale_log2 : kNegInf;
    s[nt][2] = (ok_hi & 0xffu) ? s[nt][2] * scale_log2 : kNegInf;
    s[nt][3] = (ok_hi >> 8) ? s[nt][3] * scale_log2 : kNegInf;
    max_lo = fmaxf(max_lo, fmaxf(s[nt][0], s[nt][1]));
    max_hi = fmaxf(max_hi, fmaxf(s[nt][2], s[nt][3]));
  }
  max_lo = fmaxf(max_lo, __shfl_xor_sync(0xffffffffu, max_lo, 1));
  max_lo = fmaxf(max_lo, __shfl_xor_sync(0xffffffffu, max_lo, 2));
  max_hi = fmaxf(max_hi, __shfl_xor_sync(0xffffffffu, max_hi, 1));
  max_hi = fmaxf(max_hi, __shfl_xor_sync(0xffffffffu, max_hi, 2));
  const float new_lo = fmaxf(m_lo, max_lo), new_hi = fmaxf(m_hi, max_hi);
  // While a row has seen nothing its max is -inf: subtract 0 instead, so
  // that exp2(-inf - base) is 0 rather than NaN.
  base_lo = new_lo == kNegInf ? 0.0f : new_lo;
  base_hi = new_hi == kNegInf ? 0.0f : new_hi;
  const float corr_lo = exp2f(m_lo - base_lo), corr_hi = exp2f(m_hi - base_hi);
  m_lo = new_lo;
  m_hi = new_hi;
  l_lo *= corr_lo;
  l_hi *= corr_hi;
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) {
    acc[i][0] *= corr_lo;
    acc[i][1] *= corr_lo;
    acc[i][2] *= corr_hi;
    acc[i][3] *= corr_hi;
  }
}

template <typename T, int kD>
__global__ void __launch_bounds__(kAttnMaxWarps* kWarpSize) DecodeAttentionKernel(const AttnParams p) {
  constexpr int kPitch = kD + 8;  // elements per shared K/V row
  constexpr int kRowPacks = kD / 8;
  constexpr int kKSteps = kD / 16;  // QK^T k-steps; also PV n-tile pairs
  constexpr int kDTiles = kD / 8;   // PV n-tiles
  constexpr int kSlotTiles = kAttnTile / 8;
  extern __shared__ uint4 attn_smem[];
  T* const k_s = reinterpret_cast<T*>(attn_smem);
  T* const v_s = k_s + kAttnTile * kPitch;
  uint32_t* const live_s = reinterpret_cast<uint32_t*>(v_s + kAttnTile * kPitch);  // [warp][word]
  uint8_t* const mask_s = reinterpret_cast<uint8_t*>(live_s + kAttnMaxWarps * kAttnMaskWords);

  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int chunk = blockIdx.x;
  const int64_t head = blockIdx.z;
  const int m_tile = blockIdx.y * warps + warp;
  const bool active = m_tile < p.m_tiles;
  // Rows past `rows` (a partial m-tile) repeat the last row: they read valid
  // data and are never stored.
  const int row_lo = min(m_tile * 16 + g, p.rows - 1);
  const int row_hi = min(m_tile * 16 + g + 8, p.rows - 1);

  // Q as A fragments.
  uint32_t qa[kKSteps][4];
  LoadQFragments<T, kD, kKSteps>(static_cast<const T*>(p.q) + head * p.rows * kD, row_lo, row_hi, t, qa);
  const uint8_t* const mask_lo = mask_s + (row_lo % p.tokens) * kAttnMaskPitch + 2 * t;
  const uint8_t* const mask_hi = mask_s + (row_hi % p.tokens) * kAttnMaskPitch + 2 * t;

  // ldmatrix lane addresses (element offsets in a tile). Matrix m = lane / 8,
  // its row lane % 8. K (x4): m -> slots +8 * (m / 2), dims +8 * (m % 2), so
  // registers 0, 1 are the B fragment of slots 0..7 and 2, 3 of slots 8..15.
  // V (x4, transposed): m -> slots +8 * (m % 2), dims +8 * (m / 2), so
  // registers 0, 1 are the B fragment of dims 0..7 and 2, 3 of dims 8..15.
  const int mat = lane / 8, mat_row = lane % 8;
  const int k_lane = ((mat / 2) * 8 + mat_row) * kPitch + (mat % 2) * 8;
  const int v_lane = ((mat % 2) * 8 + mat_row) * kPitch + (mat / 2) * 8;

  // Running state of rows g (lo) and g + 8 (hi); each lane sums its own
  // columns, the four lanes of a row are added at the end.
  float m_lo = kNegInf, m_hi = kNegInf, l_lo = 0.0f, l_hi = 0.0f;
  float acc[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;

  const T* const k_head = static_cast<const T*>(p.k) + head * p.cache_slots * kD;
  const T* const v_head = static_cast<const T*>(p.v) + head * p.cache_slots * kD;
  const int64_t tiles = (p.kv_length + kAttnTile - 1) / kAttnTile;
  const int64_t tile_begin = static_cast<int64_t>(chunk) * p.chunk_tiles;
  const int64_t tile_end = min(tile_begin + p.chunk_tiles, tiles);
  // blockDim.x is a multiple of 16: a thread always handles the same word.
  const int word = threadIdx.x % kAttnMaskWords;

  for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const int64_t slot0 = tile * kAttnTile;
    // 1. Mask bytes of all tokens, and which slots anyone sees.
    uint32_t seen = 0;
    for (int i = threadIdx.x; i < p.tokens * kAttnMaskWords; i += blockDim.x) {
      const int tok = i / kAttnMaskWords;
      const uint32_t bits =
          LoadMaskWord(p.allowed + tok * p.mask_stride, slot0 + 4 * word, p.kv_length, p.mask_words);
      *reinterpret_cast<uint32_t*>(mask_s + tok * kAttnMaskPitch + 4 * word) = bits;
      seen |= bits;
    }
    seen |= __shfl_xor_sync(0xffffffffu, seen, 16);  // lanes l and l + 16 share a word
    if (lane < kAttnMaskWords) live_s[warp * kAttnMaskWords + lane] = seen;
    if (!__syncthreads_or(seen != 0)) continue;  // no token sees this tile

    // 2. K and V rows of the seen slots; zeros elsewhere.
    for (int i = threadIdx.x; i < kAttnTile * kRowPacks; i += blockDim.x) {
      const int s = i / kRowPacks, c = i % kRowPacks;
      uint32_t live = 0;
      for (int w = 0; w < warps; ++w) live |= live_s[w * kAttnMaskWords + s / 4];
      T* const kd = k_s + s * kPitch + c * 8;
      T* const vd = v_s + s * kPitch + c * 8;
      if ((live >> (8 * (s % 4))) & 0xffu) {
        const int64_t offset = (slot0 + s) * kD + c * 8;
        CpAsync16(kd, k_head + offset);
        CpAsync16(vd, v_head + offset);
      } else {
        *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
      }
    }
    CpAsyncWaitAll();
    __syncthreads();

    if (active) {
      // 3a. Scores: s[nt] holds (g, 8 nt + 2t..+1) in [0..1], (g + 8, ...) in [2..3].
      float s[kSlotTiles][4];
#pragma unroll
      for (int i = 0; i < kSlotTiles; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
        for (int np = 0; np < kSlotTiles / 2; ++np) {
          uint32_t b[4];
          LdMatrixX4(b, k_s + k_lane + np * 16 * kPitch + kk * 16);
          Mma16x8x16<T>(s[2 * np], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b[0], b[1]);
          Mma16x8x16<T>(s[2 * np + 1], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b[2], b[3]);
        }
      }
      // 3b. Mask, scale, running max and rescaling.
      float base_lo, base_hi;
      OnlineSoftmaxStep<kSlotTiles, kDTiles>(s, mask_lo, mask_hi, p.scale_log2, m_lo, m_hi, l_lo, l_hi, acc, base_lo,
                                             base_hi);
      // 3c. P = exp2(s - max) rounded to T as A fragments of 4 k-steps of 16
      // slots: a0 = rows g of n-tile 2ks, a1 = rows g+8 of it, a2/a3 of 2ks+1.
      uint32_t pa[kSlotTiles / 2][4];
#pragma unroll
      for (int ks = 0; ks < kSlotTiles / 2; ++ks) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int nt = 2 * ks + h;
          float r0, r1, r2, r3;
          pa[ks][2 * h] = PackRounded<T>(exp2f(s[nt][0] - base_lo), exp2f(s[nt][1] - base_lo), &r0, &r1);
          pa[ks][2 * h + 1] = PackRounded<T>(exp2f(s[nt][2] - base_hi), exp2f(s[nt][3] - base_hi), &r2, &r3);
          l_lo += r0 + r1;
          l_hi += r2 + r3;
        }
      }
      // 3d. acc += P V.
#pragma unroll
      for (int ks = 0; ks < kSlotTiles / 2; ++ks) {
#pragma unroll
        for (int dp = 0; dp < kKSteps; ++dp) {
          uint32_t b[4];
          LdMatrixX4Trans(b, v_s + v_lane + ks * 16 * kPitch + dp * 16);
          Mma16x8x16<T>(acc[2 * dp], pa[ks][0], pa[ks][1], pa[ks][2], pa[ks][3], b[0], b[1]);
          Mma16x8x16<T>(acc[2 * dp + 1], pa[ks][0], pa[ks][1], pa[ks][2], pa[ks][3], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this tile's shared memory
  }

  if (!active) return;
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 1);
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 2);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 1);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 2);

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = m_tile * 16 + g + 8 * half;
    if (row >= p.rows) continue;
    const float m = half == 0 ? m_lo : m_hi;
    const float l = half == 0 ? l_lo : l_hi;
    const int64_t row_index = head * p.rows + row;
    if (p.chunks == 1) {
      T* const o = static_cast<T*>(p.out) + row_index * kD + 2 * t;
#pragma unroll
      for (int i = 0; i < kDTiles; ++i) {
        const float x = l > 0.0f ? __fdiv_rn(acc[i][2 * half], l) : 0.0f;
        const float y = l > 0.0f ? __fdiv_rn(acc[i][2 * half + 1], l) : 0.0f;
        float rx, ry;
        *reinterpret_cast<uint32_t*>(o + i * 8) = PackRounded<T>(x, y, &rx, &ry);
      }
    } else {
      // Written for every row, zeros included (a row that saw nothing here):
      // the combine weighs them by 0 rather than branching per chunk.
      const int64_t partial = (head * p.chunks + chunk) * p.rows + row;
      if (t == 0) p.ws_ml[partial] = make_float2(m, l);
      float* const a = p.ws_acc + partial * kD + 2 * t;
#pragma unroll
      for (int i = 0; i < kDTiles; ++i) {
        *reinterpret_cast<float2*>(a + i * 8) = make_float2(acc[i][2 * half], acc[i][2 * half + 1]);
      }
    }
  }
}

// Merges the chunks of each (head, row): one block per row, its warps taking
// a quarter of the chunks each, each lane 4 of the head_dim columns.
// out = sum_c 2^(m_c - M) acc_c / sum_c 2^(m_c - M) l_c, with weight 0 for
// chunks where the row saw nothing (m_c = -inf, acc_c = 0). A warp loads the
// weights of 32 chunks with one load per lane and passes them round by
// shuffle, so its acc loads carry no branch and overlap.
template <typename T>
__global__ void __launch_bounds__(kAttnCombineWarps* kWarpSize)
    DecodeAttentionCombineKernel(const float* __restrict__ ws_acc, const float2* __restrict__ ws_ml,
                                 T* __restrict__ out, int rows, int chunks, int head_dim) {
  __shared__ float4 warp_sums[kAttnCombineWarps][kWarpSize];
  __shared__ float warp_totals[kAttnCombineWarps];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int64_t index = blockIdx.x;  // head * rows + row
  const int64_t head = index / rows, row = index % rows;
  const float2* const ml = ws_ml + head * chunks * rows + row;  // chunk c at ml[c * rows]
  float max = kNegInf;  // every warp finds the same
  for (int c = lane; c < chunks; c += kWarpSize) max = fmaxf(max, ml[static_cast<int64_t>(c) * rows].x);
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, offset));
  }
  // Lanes past head_dim read column 0 along and store nothing.
  const bool live_lane = lane * 4 < head_dim;
  const float* const acc = ws_acc + (head * chunks * rows + row) * head_dim + (live_lane ? lane * 4 : 0);
  const int64_t chunk_stride = static_cast<int64_t>(rows) * head_dim;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float total = 0.0f;
  const int end = static_cast<int>(static_cast<int64_t>(chunks) * (warp + 1) / kAttnCombineWarps);
  for (int base = static_cast<int>(static_cast<int64_t>(chunks) * warp / kAttnCombineWarps); base < end;
       base += kWarpSize) {
    float w = 0.0f;
    if (base + lane < end) {
      const float2 mc = ml[static_cast<int64_t>(base + lane) * rows];
      if (mc.x != kNegInf) {
        w = exp2f(mc.x - max);
        total += w * mc.y;
      }
    }
    const int count = min(kWarpSize, end - base);
#pragma unroll 4
    for (int j = 0; j < count; ++j) {
      const float wj = __shfl_sync(0xffffffffu, w, j);
      const float4 a = *reinterpret_cast<const float4*>(acc + (base + j) * chunk_stride);
      sum.x += wj * a.x;
      sum.y += wj * a.y;
      sum.z += wj * a.z;
      sum.w += wj * a.w;
    }
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
  warp_sums[warp][lane] = sum;
  if (lane == 0) warp_totals[warp] = total;
  __syncthreads();
  if (warp != 0 || !live_lane) return;
  total = 0.0f;
  sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int w = 0; w < kAttnCombineWarps; ++w) {
    const float4 part = warp_sums[w][lane];
    sum.x += part.x;
    sum.y += part.y;
    sum.z += part.z;
    sum.w += part.w;
    total += warp_totals[w];
  }
  const float x = total > 0.0f ? __fdiv_rn(sum.x, total) : 0.0f;
  const float y = total > 0.0f ? __fdiv_rn(sum.y, total) : 0.0f;
  const float z = total > 0.0f ? __fdiv_rn(sum.z, total) : 0.0f;
  const float u = total > 0.0f ? __fdiv_rn(sum.w, total) : 0.0f;
  float rounded[4];
  uint2 packed;
  packed.x = PackRounded<T>(x, y, &rounded[0], &rounded[1]);
  packed.y = PackRounded<T>(z, u, &rounded[2], &rounded[3]);
  *reinterpret_cast<uint2*>(out + index * head_dim + lane * 4) = packed;
}

// Query rows per block (16 per warp) and warps per block for `rows` rows:
// at most kAttnMaxWarps warps, the m-tiles spread evenly over the row blocks.
struct AttnRowSplit {
  int m_tiles, row_blocks, warps;
};

AttnRowSplit SplitRows(int64_t rows) {
  AttnRowSplit split;
  split.m_tiles = static_cast<int>((rows + 15) / 16);
  split.row_blocks = (split.m_tiles + kAttnMaxWarps - 1) / kAttnMaxWarps;
  split.warps = (split.m_tiles + split.row_blocks - 1) / split.row_blocks;
  return split;
}

// Warps per SM the automatic chunking aims at (each block also keeps a 64-slot
// K/V tile in flight), and at most the blocks that fit at once: shared memory
// bounds residency (about 6 one-warp blocks an SM at D = 128). On an H200
// (build-fusedcheck/NOTES.md, run 2) one tile per chunk was the fastest pinned
// chunking or within 1% of it for n <= 16 up to L = 4096 (n = 16 at L = 4096:
// two tiles); at L = 8192, n <= 4, one tile per chunk made 1024 one-warp blocks,
// more than fit, and two tiles per chunk ran 18-20% faster, which the cap picks.
constexpr int64_t kAttnTargetWarpsPerSm = 8;
constexpr int64_t kAttnReservedSharedBytes = 1024;  // per block, sm_80+


int64_t AttnSharedBytes(int64_t head_dim, int64_t element_bytes, int64_t tokens) {
  const int64_t mask = (tokens * kAttnMaskPitch + 15) / 16 * 16;
  return 2 * kAttnTile * (head_dim + 8) * element_bytes + kAttnMaxWarps * kAttnMaskWords * 4 + mask;
}

template <typename T, int kD>
int RunDecodeAttention(const AttnParams& params, const AttnRowSplit& split, int64_t kv_heads, int64_t tokens,
                       cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned int>(params.chunks), static_cast<unsigned int>(split.row_blocks),
                  static_cast<unsigned int>(kv_heads));
  const size_t shared = static_cast<size_t>(AttnSharedBytes(kD, sizeof(T), tokens));
  DecodeAttentionKernel<T, kD><<<grid, split.warps * kWarpSize, shared, stream>>>(params);
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess || params.chunks == 1) return static_cast<int>(error);
  const int64_t head_rows = kv_heads * params.rows;  // <= 65535 * 4096 < 2^31
  DecodeAttentionCombineKernel<T><<<static_cast<unsigned int>(head_rows), kAttnCombineWarps * kWarpSize, 0, stream>>>(
      params.ws_acc, params.ws_ml, static_cast<T*>(params.out), params.rows, params.chunks, kD);
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int RunDecodeAttentionTyped(const AttnParams& params, const AttnRowSplit& split, int64_t kv_heads, int64_t tokens,
                            int64_t head_dim, cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      return RunDecodeAttention<T, 64>(params, split, kv_heads, tokens, stream);
    case 80:
      return RunDecodeAttention<T, 80>(params, split, kv_heads, tokens, stream);
    case 96:
      return RunDecodeAttention<T, 96>(params, split, kv_heads, tokens, stream);
    case 128:
      return RunDecodeAttention<T, 128>(params, split, kv_heads, tokens, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

// --- Decode attention, split variant (sm_90+) -----------------------------------
//
// Grid: (blocks, kv_heads), the blocks of one KV head forming one thread block
// cluster. Warp w of block b takes slots [(b * warps + w) * warp_slots, + warp_slots)
// (warp_slots = 16 * warp_steps) for every query row (rows <= 16: one m16 tile):
//   1. Q fragments and the mask words of all its slots for every token (one
//      4-byte word per lane and token), staged in shared memory; the OR over
//      tokens says which slots anyone sees;
//   2. cp.async of the K and V rows of seen slots, 16 slots (one step) per
//      commit group, two steps in flight; unseen slots get zeros, never a load;
//   3. per step: S = Q K^T (two n8 tiles), mask by select, running max/sum
//      (base 2), P rounded to T, acc += P V, as in DecodeAttentionKernel;
//   4. its (max, sum, acc) go to shared memory (acc over its first stage).
// Then the block's threads merge the warps' partials per (row, column pair);
// with one block that is the output, else the block partial stays in shared
// memory, the cluster syncs, and block r merges the blocks' partials (read
// through distributed shared memory) for items r, r + blocks, ... A second
// cluster sync keeps every block's shared memory alive until all have read it.

constexpr int kSplitStep = 16;  // slots per warp step
constexpr int kSplitMaxWarps = 8;
constexpr int kSplitMaxBlocks = 8;  // portable cluster size
constexpr int kSplitMaxWarpSteps = 8;
constexpr int kSplitMaxWarpSlots = kSplitStep * kSplitMaxWarpSteps;  // 128: one mask word per lane
constexpr int kSplitStages = 2;
constexpr int kSplitMaxTokens = static_cast<int>(kDecodeAttentionSplitMaxRows);
constexpr int kSplitMaskPitch = kSplitMaxWarpSlots + 4;  // bytes per staged mask row
constexpr int kSplitRows = 16;                           // one m16 tile
static_assert(kSplitMaxBlocks * kSplitMaxWarps * kSplitMaxWarpSlots == kDecodeAttentionSplitMaxLength, "");

struct SplitParams {
  const void* q;
  const void* k;
  const void* v;
  const uint8_t* allowed;
  void* out;
  int64_t mask_stride;
  int64_t kv_length;
  int64_t cache_slots;
  int rows;
  int tokens;
  int warp_steps;
  int stages;  // 1 (one step per warp) or kSplitStages
  float scale_log2;
  bool mask_words;
};

// Byte offsets of the dynamic shared memory of one block.
struct SplitLayout {
  int stage_bytes;      // K and V of one step, rows padded to head_dim + 8
  int warp_bytes;       // stages of one warp
  int mask_warp_bytes;  // staged mask of one warp: tokens rows of kSplitMaskPitch
  int mask_offset;      // [warps][tokens][kSplitMaskPitch] bytes
  int live_offset;      // [warps][32] words: OR of the tokens' mask words
  int warp_ml_offset;   // [warps][16] float2 (max, sum)
  int block_ml_offset;  // [16] float2
  int block_acc_offset; // [16][head_dim] float
  int total;
};

__host__ __device__ __forceinline__ SplitLayout MakeSplitLayout(int head_dim, int element_bytes, int warps, int stages,
                                                                int tokens) {
  SplitLayout l;
  l.stage_bytes = 2 * kSplitStep * (head_dim + 8) * element_bytes;
  l.warp_bytes = stages * l.stage_bytes;
  l.mask_warp_bytes = (tokens * kSplitMaskPitch + 15) / 16 * 16;
  l.mask_offset = warps * l.warp_bytes;
  l.live_offset = l.mask_offset + warps * l.mask_warp_bytes;
  l.warp_ml_offset = l.live_offset + warps * kWarpSize * 4;
  l.block_ml_offset = l.warp_ml_offset + warps * kSplitRows * 8;
  l.block_acc_offset = l.block_ml_offset + kSplitRows * 8;
  l.total = l.block_acc_offset + kSplitRows * head_dim * 4;
  return l;
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void CpAsyncWaitGroup() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// out[row][col..col + 1] = sum / total rounded to T (zeros when total is 0).
template <typename T>
__device__ __forceinline__ void StoreSplitOutput(void* out, int64_t index, float2 sum, float total) {
  const float x = total > 0.0f ? __fdiv_rn(sum.x, total) : 0.0f;
  const float y = total > 0.0f ? __fdiv_rn(sum.y, total) : 0.0f;
  float rx, ry;
  *reinterpret_cast<uint32_t*>(static_cast<T*>(out) + index) = PackRounded<T>(x, y, &rx, &ry);
}

template <typename T, int kD>
__global__ void __launch_bounds__(kSplitMaxWarps* kWarpSize) DecodeAttentionSplitKernel(const SplitParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kPitch = kD + 8;  // elements per shared K/V row; floats per partial acc row
  constexpr int kRowPacks = kD / 8;
  constexpr int kKSteps = kD / 16;
  constexpr int kDTiles = kD / 8;
  constexpr int kStageElems = 2 * kSplitStep * kPitch;
  constexpr int kLanePacks = kSplitStep * kRowPacks / kWarpSize;  // K (and V) copies per lane and step
  static_assert(kSplitStep * kRowPacks % kWarpSize == 0, "a step's packs split evenly over a warp");
  extern __shared__ uint4 split_smem[];
  uint8_t* const smem = reinterpret_cast<uint8_t*>(split_smem);
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const SplitLayout layout = MakeSplitLayout(kD, sizeof(T), warps, p.stages, p.tokens);
  T* const stage0 = reinterpret_cast<T*>(smem + warp * layout.warp_bytes);
  uint8_t* const mask_s = smem + layout.mask_offset + warp * layout.mask_warp_bytes;
  uint32_t* const live_s = reinterpret_cast<uint32_t*>(smem + layout.live_offset) + warp * kWarpSize;
  float2* const warp_ml = reinterpret_cast<float2*>(smem + layout.warp_ml_offset);
  float2* const block_ml = reinterpret_cast<float2*>(smem + layout.block_ml_offset);
  float* const block_acc = reinterpret_cast<float*>(smem + layout.block_acc_offset);

  const int64_t head = blockIdx.y;
  const int warp_slots = p.warp_steps * kSplitStep;
  const int64_t slot_begin = (static_cast<int64_t>(blockIdx.x) * warps + warp) * warp_slots;
  // Tile rows past `rows` repeat the last row: valid data, never merged.
  const int row_lo = min(g, p.rows - 1);
  const int row_hi = min(g + 8, p.rows - 1);

  // 1. Q as A fragments, then the mask words.
  uint32_t qa[kKSteps][4];
  LoadQFragments<T, kD, kKSteps>(static_cast<const T*>(p.q) + head * p.rows * kD, row_lo, row_hi, t, qa);
  {
    // Lane l: the warp's slots 4l..4l+3 (zero past the warp's run or kv_length).
    const int64_t slot = slot_begin + 4 * lane;
    const bool in_range = 4 * lane < warp_slots && slot < p.kv_length;
    uint32_t seen = 0;
#pragma unroll
    for (int tok = 0; tok < kSplitMaxTokens; ++tok) {
      if (tok < p.tokens) {
        const uint32_t bits =
            in_range ? LoadMaskWord(p.allowed + tok * p.mask_stride, slot, p.kv_length, p.mask_words) : 0u;
        *reinterpret_cast<uint32_t*>(mask_s + tok * kSplitMaskPitch + 4 * lane) = bits;
        seen |= bits;
      }
    }
    live_s[lane] = seen;
  }
  __syncwarp();

  // 2. K/V of one step into its stage: seen slots by cp.async, zeros elsewhere.
  const T* const k_head = static_cast<const T*>(p.k) + head * p.cache_slots * kD;
  const T* const v_head = static_cast<const T*>(p.v) + head * p.cache_slots * kD;
  auto issue = [&](int step) {
    T* const k_dst = stage0 + (step & (p.stages - 1)) * kStageElems;
    T* const v_dst = k_dst + kSplitStep * kPitch;
#pragma unroll
    for (int i = 0; i < kLanePacks; ++i) {
      const int idx = lane + kWarpSize * i;
      const int j = idx / kRowPacks, c = idx % kRowPacks;
      const int local = step * kSplitStep + j;
      T* const kd = k_dst + j * kPitch + c * 8;
      T* const vd = v_dst + j * kPitch + c * 8;
      if ((live_s[local / 4] >> (8 * (local % 4))) & 0xffu) {
        const int64_t offset = (slot_begin + local) * kD + c * 8;
        CpAsync16(kd, k_head + offset);
        CpAsync16(vd, v_head + offset);
      } else {
        *reinterpret_cast<uint4*>(kd) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vd) = make_uint4(0, 0, 0, 0);
      }
    }
  };
  // One commit group per step, plus empty ones, so that "all but the newest
  // group" is always the current step.
  issue(0);
  CpAsyncCommit();
  if (p.warp_steps > 1) issue(1);
  CpAsyncCommit();

  const int mat = lane / 8, mat_row = lane % 8;
  const int k_lane = ((mat / 2) * 8 + mat_row) * kPitch + (mat % 2) * 8;
  const int v_lane = ((mat % 2) * 8 + mat_row) * kPitch + (mat / 2) * 8;
  const uint8_t* const mask_lo = mask_s + (row_lo % p.tokens) * kSplitMaskPitch + 2 * t;
  const uint8_t* const mask_hi = mask_s + (row_hi % p.tokens) * kSplitMaskPitch + 2 * t;

  float m_lo = kNegInf, m_hi = kNegInf, l_lo = 0.0f, l_hi = 0.0f;
  float acc[kDTiles][4];
#pragma unroll
  for (int i = 0; i < kDTiles; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;

  for (int step = 0; step < p.warp_steps; ++step) {
    CpAsyncWaitGroup<1>();
    __syncwarp();
    const uint32_t live = live_s[4 * step] | live_s[4 * step + 1] | live_s[4 * step + 2] | live_s[4 * step + 3];
    if (live != 0) {  // else nobody sees the step: it would change nothing
      const T* const k_s = stage0 + (step & (p.stages - 1)) * kStageElems;
      const T* const v_s = k_s + kSplitStep * kPitch;
      // 3a. Scores: s[nt] holds (g, 8 nt + 2t..+1) in [0..1], (g + 8, ...) in [2..3].
      float s[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        uint32_t b[4];
        LdMatrixX4(b, k_s + k_lane + kk * 16);
        Mma16x8x16<T>(s[0], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b[0], b[1]);
        Mma16x8x16<T>(s[1], qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], b[2], b[3]);
      }
      // 3b. Mask, scale, running max and rescaling.
      float base_lo, base_hi;
      OnlineSoftmaxStep<2, kDTiles>(s, mask_lo + step * kSplitStep, mask_hi + step * kSplitStep, p.scale_log2, m_lo,
                                    m_hi, l_lo, l_hi, acc, base_lo, base_hi);
      // 3c. P as the A fragment of one 16-slot k-step: a0/a1 rows g/g+8 of
      // n-tile 0, a2/a3 of n-tile 1.
      uint32_t pa[4];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float r0, r1, r2, r3;
        pa[2 * h] = PackRounded<T>(exp2f(s[h][0] - base_lo), exp2f(s[h][1] - base_lo), &r0, &r1);
        pa[2 * h + 1] = PackRounded<T>(exp2f(s[h][2] - base_hi), exp2f(s[h][3] - base_hi), &r2, &r3);
        l_lo += r0 + r1;
        l_hi += r2 + r3;
      }
      // 3d. acc += P V.
#pragma unroll
      for (int dp = 0; dp < kKSteps; ++dp) {
        uint32_t b[4];
        LdMatrixX4Trans(b, v_s + v_lane + dp * 16);
        Mma16x8x16<T>(acc[2 * dp], pa[0], pa[1], pa[2], pa[3], b[0], b[1]);
        Mma16x8x16<T>(acc[2 * dp + 1], pa[0], pa[1], pa[2], pa[3], b[2], b[3]);
      }
    }
    __syncwarp();  // the warp is done with this stage before it is refilled
    if (step + kSplitStages < p.warp_steps) issue(step + kSplitStages);
    CpAsyncCommit();
  }
  CpAsyncWaitAll();
  __syncwarp();

  // 4. The warp's partial: acc over its first stage ([16][kPitch] floats fill
  // exactly the stage's 2 x 16 x kPitch 16-bit elements), (max, sum) per row.
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 1);
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 2);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 1);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 2);
  {
    float* const wacc = reinterpret_cast<float*>(stage0);
#pragma unroll
    for (int i = 0; i < kDTiles; ++i) {
      *reinterpret_cast<float2*>(wacc + g * kPitch + i * 8 + 2 * t) = make_float2(acc[i][0], acc[i][1]);
      *reinterpret_cast<float2*>(wacc + (g + 8) * kPitch + i * 8 + 2 * t) = make_float2(acc[i][2], acc[i][3]);
    }
    if (t == 0) {
      warp_ml[warp * kSplitRows + g] = make_float2(m_lo, l_lo);
      warp_ml[warp * kSplitRows + g + 8] = make_float2(m_hi, l_hi);
    }
  }
  __syncthreads();

  // 5. Merge the warps: out = sum_w 2^(m_w - M) acc_w / sum_w 2^(m_w - M) l_w,
  // weight 0 for warps whose row saw nothing (m_w = -inf, acc_w = 0).
  constexpr int kPairs = kD / 2;
  const int items = p.rows * kPairs;
  const bool clustered = gridDim.x > 1;
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const int row = item / kPairs, col = 2 * (item % kPairs);
    float max = kNegInf;
    for (int w = 0; w < warps; ++w) max = fmaxf(max, warp_ml[w * kSplitRows + row].x);
    float total = 0.0f;
    float2 sum = make_float2(0.0f, 0.0f);
    for (int w = 0; w < warps; ++w) {
      const float2 ml = warp_ml[w * kSplitRows + row];
      const float weight = ml.x == kNegInf ? 0.0f : exp2f(ml.x - max);
      const float2 a =
          *reinterpret_cast<const float2*>(reinterpret_cast<const float*>(smem + w * layout.warp_bytes) +
                                           row * kPitch + col);
      total += weight * ml.y;
      sum.x += weight * a.x;
      sum.y += weight * a.y;
    }
    if (!clustered) {
      StoreSplitOutput<T>(p.out, (head * p.rows + row) * kD + col, sum, total);
    } else {
      *reinterpret_cast<float2*>(block_acc + row * kD + col) = sum;
      if (col == 0) block_ml[row] = make_float2(max, total);
    }
  }
  if (!clustered) return;

  // 6. Merge the blocks of the cluster (gridDim.x == cluster size).
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int blocks = static_cast<int>(gridDim.x);
  const int rank = static_cast<int>(cluster.block_rank());
  for (int item = rank * blockDim.x + threadIdx.x; item < items; item += blocks * blockDim.x) {
    const int row = item / kPairs, col = 2 * (item % kPairs);
    float2 ml[kSplitMaxBlocks], a[kSplitMaxBlocks];
#pragma unroll
    for (int b = 0; b < kSplitMaxBlocks; ++b) {  // past `blocks`: the last block again, weight 0
      const unsigned int source = static_cast<unsigned int>(min(b, blocks - 1));
      ml[b] = cluster.map_shared_rank(block_ml, source)[row];
      a[b] = *reinterpret_cast<const float2*>(cluster.map_shared_rank(block_acc, source) + row * kD + col);
    }
    float max = kNegInf;
#pragma unroll
    for (int b = 0; b < kSplitMaxBlocks; ++b) {
      if (b < blocks) max = fmaxf(max, ml[b].x);
    }
    float total = 0.0f;
    float2 sum = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int b = 0; b < kSplitMaxBlocks; ++b) {
      const float weight = b < blocks && ml[b].x != kNegInf ? exp2f(ml[b].x - max) : 0.0f;
      total += weight * ml[b].y;
      sum.x += weight * a[b].x;
      sum.y += weight * a[b].y;
    }
    StoreSplitOutput<T>(p.out, (head * p.rows + row) * kD + col, sum, total);
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
#else
  __trap();  // never launched: DecodeAttentionSplitSupported requires sm_90 code
#endif
}

// Per device: whether the split kernel may run (sm_90+ device, sm_90+ code).
bool SplitKernelAvailable() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};  // 0 unknown, 1 yes, 2 no
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return false;
  int state = cached[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int major = 0;
    cudaFuncAttributes attributes;
    const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
                    major >= 9 &&
                    cudaFuncGetAttributes(&attributes, DecodeAttentionSplitKernel<__nv_bfloat16, 128>) == cudaSuccess &&
                    attributes.binaryVersion >= 90;
    if (!ok) (void)cudaGetLastError();
    state = ok ? 1 : 2;
    cached[device].store(state, std::memory_order_relaxed);
  }
  return state == 1;
}

template <typename T, int kD>
int RunDecodeAttentionSplit(const SplitParams& params, int blocks, int warps, int64_t kv_heads, cudaStream_t stream) {
  void (*kernel)(const SplitParams) = DecodeAttentionSplitKernel<T, kD>;
  const SplitLayout layout = MakeSplitLayout(kD, sizeof(T), warps, params.stages, params.tokens);
  if (layout.total > 48 * 1024) {
    // Once per device: allow the most any launch of this instantiation asks for.
    constexpr int kMaxDevices = 64;
    static std::atomic<bool> raised[kMaxDevices] = {};
    int device = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error != cudaSuccess) return static_cast<int>(error);
    if (device < 0 || device >= kMaxDevices || !raised[device].load(std::memory_order_relaxed)) {
      const SplitLayout most = MakeSplitLayout(kD, sizeof(T), kSplitMaxWarps, kSplitStages, kSplitMaxTokens);
      error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most.total);
      if (error != cudaSuccess) return static_cast<int>(error);
      if (device >= 0 && device < kMaxDevices) raised[device].store(true, std::memory_order_relaxed);
    }
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned int>(blocks), static_cast<unsigned int>(kv_heads), 1);
  config.blockDim = dim3(static_cast<unsigned int>(warps * kWarpSize), 1, 1);
  config.dynamicSmemBytes = static_cast<size_t>(layout.total);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = static_cast<unsigned int>(blocks);
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = blocks > 1 ? 1 : 0;
  const cudaError_t error = cudaLaunchKernelEx(&config, kernel, params);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return static_cast<int>(error);
  }
  return static_cast<int>(cudaGetLastError());
}

template <typename T>
int RunDecodeAttentionSplitTyped(const SplitParams& params, int blocks, int warps, int64_t kv_heads, int64_t head_dim,
                                 cudaStream_t stream) {
  switch (head_dim) {
    case 64:
      return RunDecodeAttentionSplit<T, 64>(params, blocks, warps, kv_heads, stream);
    case 80:
      return RunDecodeAttentionSplit<T, 80>(params, blocks, warps, kv_heads, stream);
    case 96:
      return RunDecodeAttentionSplit<T, 96>(params, blocks, warps, kv_heads, stream);
    case 128:
      return RunDecodeAttentionSplit<T, 128>(params, blocks, warps, kv_heads, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool DecodeAttentionSupported(DType dtype, const void* q, const void* k_cache, const void* v_cache,
                              const DecodeAttentionShape& shape) {
  const DecodeAttentionShape& s = shape;
  const bool head_dim_ok = s.head_dim == 64 || s.head_dim == 80 || s.head_dim == 96 || s.head_dim == 128;
  return (dtype == DType::kBF16 || dtype == DType::kF16) && head_dim_ok && s.kv_heads >= 1 && s.kv_heads <= 65535 &&
         s.tokens >= 1 && s.tokens <= kDecodeAttentionMaxTokens && s.rows >= s.tokens &&
         s.rows <= kDecodeAttentionMaxRows && s.rows % s.tokens == 0 && s.kv_length >= 1 &&
         s.kv_length <= s.cache_slots && (s.tokens == 1 || s.mask_stride >= s.kv_length) && Aligned(q) &&
         Aligned(k_cache) && Aligned(v_cache);
}

DecodeAttentionPlan PlanDecodeAttention(const DecodeAttentionShape& shape, int64_t chunk_tiles) {
  const int64_t tiles = (shape.kv_length + kAttnTile - 1) / kAttnTile;
  const AttnRowSplit split = SplitRows(shape.rows);
  if (chunk_tiles <= 0) {
    // Enough blocks for about kAttnTargetWarpsPerSm warps an SM (no more than
    // fit at once), but no more chunks than kv_length / rows: each chunk
    // writes and the combine reads rows * (head_dim + 2) floats per head,
    // which must stay well below the kv_length * head_dim * 2 K/V elements
    // the chunks summarise.
    const int64_t resident = std::max<int64_t>(
        1, SharedMemoryPerMultiprocessor() /
               (AttnSharedBytes(shape.head_dim, 2, shape.tokens) + kAttnReservedSharedBytes));
    const int64_t target_blocks = std::min(MultiprocessorCount() * kAttnTargetWarpsPerSm / split.warps,
                                           MultiprocessorCount() * resident);
    const int64_t per_head = shape.kv_heads * split.row_blocks;
    int64_t chunks = (target_blocks + per_head - 1) / per_head;
    chunks = std::min(chunks, std::max<int64_t>(1, shape.kv_length / shape.rows));
    chunks = std::max<int64_t>(1, std::min(chunks, tiles));
    chunk_tiles = (tiles + chunks - 1) / chunks;
  }
  DecodeAttentionPlan plan;
  plan.chunk_tiles = std::max<int64_t>(1, std::min(chunk_tiles, tiles));
  plan.chunks = (tiles + plan.chunk_tiles - 1) / plan.chunk_tiles;
  plan.workspace_floats = plan.chunks > 1 ? shape.kv_heads * plan.chunks * shape.rows * (shape.head_dim + 2) : 0;
  return plan;
}

bool DecodeAttentionSplitSupported(const DecodeAttentionShape& shape) {
  return shape.rows >= 1 && shape.rows <= kDecodeAttentionSplitMaxRows && shape.kv_length >= 1 &&
         shape.kv_length <= kDecodeAttentionSplitMaxLength && SplitKernelAvailable();
}

DecodeAttentionPlan PlanDecodeAttentionSplit(const DecodeAttentionShape& shape, int64_t blocks_per_head) {
  if (!DecodeAttentionSplitSupported(shape)) return PlanDecodeAttention(shape, 0);
  const int64_t steps = (shape.kv_length + kSplitStep - 1) / kSplitStep;
  // H200 (build-fusedcheck/NOTES.md, run 3): at head_dim 64 and L = 256 one
  // block of 8 warps x 2 steps per head beat 4 clustered blocks of 4 warps by
  // 0.2-0.6 us (n = 1, 2, 4: 4.59 / 4.94 / 5.97 us against 4.81 / 5.50 /
  // 6.57); at head_dim 128 it lost at n = 1, 2 (6.20 / 7.05 against 5.88 /
  // 6.80) and drew at n = 4; from L = 1024 on, eight blocks won everywhere.
  if (blocks_per_head == 0 && shape.head_dim <= 64 && steps <= 2 * kSplitMaxWarps) blocks_per_head = 1;
  int64_t blocks = 0, warps = 0, warp_steps = 0;
  if (blocks_per_head >= 1 && blocks_per_head <= kSplitMaxBlocks) {
    const int64_t per_block = (steps + blocks_per_head - 1) / blocks_per_head;
    warps = std::min<int64_t>(kSplitMaxWarps, per_block);
    warp_steps = (per_block + warps - 1) / warps;
  }
  if (warp_steps < 1 || warp_steps > kSplitMaxWarpSteps) {
    // One step per warp while 8 blocks of 4 (then 8) warps suffice, then more
    // steps per warp.
    if (steps <= kSplitMaxBlocks * 4) {
      warps = std::min<int64_t>(4, steps);
      warp_steps = 1;
    } else if (steps <= kSplitMaxBlocks * kSplitMaxWarps) {
      warps = (steps + kSplitMaxBlocks - 1) / kSplitMaxBlocks;
      warp_steps = 1;
    } else {
      warps = kSplitMaxWarps;
      warp_steps = (steps + kSplitMaxBlocks * kSplitMaxWarps - 1) / (kSplitMaxBlocks * kSplitMaxWarps);
    }
  }
  blocks = (steps + warps * warp_steps - 1) / (warps * warp_steps);  // no block without slots
  DecodeAttentionPlan plan;
  plan.variant = DecodeAttentionVariant::kSplit;
  plan.split_blocks = blocks;
  plan.split_warps = warps;
  plan.split_warp_steps = warp_steps;
  return plan;
}

int LaunchDecodeAttention(DType dtype, const void* q, const void* k_cache, const void* v_cache, const void* allowed,
                          void* out, float* workspace, const DecodeAttentionShape& shape,
                          const DecodeAttentionPlan& plan, void* stream) {
  if (!DecodeAttentionSupported(dtype, q, k_cache, v_cache, shape) || allowed == nullptr || out == nullptr ||
      reinterpret_cast<uintptr_t>(out) % 8 != 0) {
    return cudaErrorInvalidValue;
  }
  if (plan.variant == DecodeAttentionVariant::kSplit) {
    if (!DecodeAttentionSplitSupported(shape) || plan.split_blocks < 1 || plan.split_blocks > kSplitMaxBlocks ||
        plan.split_warps < 1 || plan.split_warps > kSplitMaxWarps || plan.split_warp_steps < 1 ||
        plan.split_warp_steps > kSplitMaxWarpSteps ||
        plan.split_blocks * plan.split_warps * plan.split_warp_steps * kSplitStep < shape.kv_length) {
      return cudaErrorInvalidValue;
    }
    SplitParams params;
    params.q = q;
    params.k = k_cache;
    params.v = v_cache;
    params.allowed = static_cast<const uint8_t*>(allowed);
    params.out = out;
    params.mask_stride = shape.tokens == 1 ? 0 : shape.mask_stride;
    params.kv_length = shape.kv_length;
    params.cache_slots = shape.cache_slots;
    params.rows = static_cast<int>(shape.rows);
    params.tokens = static_cast<int>(shape.tokens);
    params.warp_steps = static_cast<int>(plan.split_warp_steps);
    params.stages = plan.split_warp_steps > 1 ? kSplitStages : 1;
    params.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(shape.head_dim)));
    params.mask_words = reinterpret_cast<uintptr_t>(allowed) % 4 == 0 && params.mask_stride % 4 == 0;
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    const int blocks = static_cast<int>(plan.split_blocks), warps = static_cast<int>(plan.split_warps);
    return dtype == DType::kBF16
               ? RunDecodeAttentionSplitTyped<__nv_bfloat16>(params, blocks, warps, shape.kv_heads, shape.head_dim, s)
               : RunDecodeAttentionSplitTyped<__half>(params, blocks, warps, shape.kv_heads, shape.head_dim, s);
  }
  const int64_t tiles = (shape.kv_length + kAttnTile - 1) / kAttnTile;
  if (plan.chunk_tiles < 1 || plan.chunk_tiles > tiles || plan.chunks != (tiles + plan.chunk_tiles - 1) / plan.chunk_tiles ||
      plan.chunks > kMaxGridX || (plan.chunks > 1 && (workspace == nullptr || !Aligned(workspace)))) {
    return cudaErrorInvalidValue;
  }
  const AttnRowSplit split = SplitRows(shape.rows);
  AttnParams params;
  params.q = q;
  params.k = k_cache;
  params.v = v_cache;
  params.allowed = static_cast<const uint8_t*>(allowed);
  params.out = out;
  params.ws_acc = workspace;
  params.ws_ml = plan.chunks > 1
                     ? reinterpret_cast<float2*>(workspace + shape.kv_heads * plan.chunks * shape.rows * shape.head_dim)
                     : nullptr;
  params.mask_stride = shape.tokens == 1 ? 0 : shape.mask_stride;
  params.kv_length = shape.kv_length;
  params.cache_slots = shape.cache_slots;
  params.rows = static_cast<int>(shape.rows);
  params.tokens = static_cast<int>(shape.tokens);
  params.m_tiles = split.m_tiles;
  params.chunk_tiles = static_cast<int>(plan.chunk_tiles);
  params.chunks = static_cast<int>(plan.chunks);
  params.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(shape.head_dim)));
  params.mask_words = reinterpret_cast<uintptr_t>(allowed) % 4 == 0 && params.mask_stride % 4 == 0;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dtype == DType::kBF16
             ? RunDecodeAttentionTyped<__nv_bfloat16>(params, split, shape.kv_heads, shape.tokens, shape.head_dim, s)
             : RunDecodeAttentionTyped<__half>(params, split, shape.kv_heads, shape.tokens, shape.head_dim, s);
}

}  // namespace decode_kernels
}  // namespace speclab
