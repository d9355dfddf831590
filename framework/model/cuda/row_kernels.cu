// Chunked argmax and softmax for a few wide rows; see row_kernels.h.
#include "framework/model/cuda/row_kernels.h"

#include "framework/model/cuda/row_reduce.cuh"

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

namespace speclab {
namespace row_kernels {
namespace {

using namespace row_reduce;  // NOLINT: the row kernels' shared reductions

// x / t, without the division at t = 1, where it is x exactly: one block
// carries a whole row, so each entry's instructions count.
__device__ __forceinline__ float Tempered(float x, float t) { return t == 1.0f ? x : x / t; }

// Grid (chunks, rows): each block writes its chunk's largest key.
__global__ void ArgmaxChunks(const float* __restrict__ x, const float* __restrict__ divisor,
                             uint64_t* __restrict__ keys, int64_t cols) {
  const int64_t row = blockIdx.y, chunk = blockIdx.x;
  const int64_t begin = chunk * kRowChunk;
  const int64_t end = min(begin + kRowChunk, cols);
  const float* xr = x + row * cols;
  const float* dr = divisor == nullptr ? nullptr : divisor + row * cols;
  uint64_t key = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = dr == nullptr ? xr[i] : xr[i] / fmaxf(dr[i], FLT_MIN);
    key = MaxKey(key, ArgmaxKey(v, static_cast<uint32_t>(i)));
  }
  key = BlockMaxKey(key);
  if (threadIdx.x == 0) keys[row * gridDim.x + chunk] = key;
}

// One block per row: the largest of the row's chunk keys, as an index.
__global__ void ArgmaxMerge(const uint64_t* __restrict__ keys, int64_t* __restrict__ out, int64_t chunks) {
  const int64_t row = blockIdx.x;
  uint64_t key = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) key = MaxKey(key, keys[row * chunks + c]);
  key = BlockMaxKey(key);
  if (threadIdx.x == 0) out[row] = static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

// The block's max and its sum of exp(v - max), from each thread's (max, sum); kBlock threads.
template <int kBlock = kThreads>
__device__ float2 BlockMaxSum(float m, float s) {
  __shared__ float2 warp_parts[kBlock / kWarpSize];
  auto merge = [](float m1, float s1, float m2, float s2) {
    const float m = fmaxf(m1, m2);
    if (m == -INFINITY) return make_float2(m, 0.0f);
    return make_float2(m, s1 * expf(m1 - m) + s2 * expf(m2 - m));
  };
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float m2 = __shfl_xor_sync(0xFFFFFFFFu, m, offset), s2 = __shfl_xor_sync(0xFFFFFFFFu, s, offset);
    const float2 r = merge(m, s, m2, s2);
    m = r.x;
    s = r.y;
  }
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  if (lane == 0) warp_parts[warp] = make_float2(m, s);
  __syncthreads();
  const float2 part = lane < kBlock / kWarpSize ? warp_parts[lane] : make_float2(-INFINITY, 0.0f);
  m = part.x;
  s = part.y;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float m2 = __shfl_xor_sync(0xFFFFFFFFu, m, offset), s2 = __shfl_xor_sync(0xFFFFFFFFu, s, offset);
    const float2 r = merge(m, s, m2, s2);
    m = r.x;
    s = r.y;
  }
  __syncthreads();
  return make_float2(m, s);
}

// Grid (chunks, rows): each block writes its chunk's (max, sum of exp(x - max)).
__global__ void SoftmaxChunks(const float* __restrict__ x, float2* __restrict__ parts, int64_t cols, float t) {
  const int64_t row = blockIdx.y, chunk = blockIdx.x;
  const int64_t begin = chunk * kRowChunk;
  const int64_t end = min(begin + kRowChunk, cols);
  const float* xr = x + row * cols;
  float m = -INFINITY;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) m = fmaxf(m, Tempered(xr[i], t));
  float s = 0.0f;
  if (m != -INFINITY)
    for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) s += expf(Tempered(xr[i], t) - m);
  const float2 r = BlockMaxSum(m, s);
  if (threadIdx.x == 0) parts[row * gridDim.x + chunk] = r;
}

// Grid (chunks, rows): each block merges its row's chunk results (a few dozen
// values, merged again by every block rather than by one more launch), then
// writes its chunk.
__global__ void SoftmaxNormalize(const float* x, const float2* __restrict__ parts, float* out, int64_t cols, float t) {
  const int64_t row = blockIdx.y, chunk = blockIdx.x, chunks = gridDim.x;
  float m = -INFINITY, s = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    const float2 p = parts[row * chunks + c];
    const float mm = fmaxf(m, p.x);
    s = mm == -INFINITY ? 0.0f : s * expf(m - mm) + p.y * expf(p.x - mm);
    m = mm;
  }
  const float2 total = BlockMaxSum(m, s);
  const int64_t begin = chunk * kRowChunk;
  const int64_t end = min(begin + kRowChunk, cols);
  const float* xr = x + row * cols;
  float* outr = out + row * cols;
  // A row of only -inf: exp(-inf - -inf) = NaN, as at::softmax gives.
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) outr[i] = expf(Tempered(xr[i], t) - total.x) / total.y;
}

// Rows of at most kSmallRow elements take one block each and one launch: for
// them the chunked kernels' second launch costs more than the spread saves
// (the shipped 8000-token vocabulary: 3 launches a step fewer per sampled row).
// A few such blocks leave the device nearly empty, so each thread issues all
// its loads at once (kPerThread values in registers) rather than waiting out
// one load after another: about 2 us instead of 14 for an 8000-token softmax.
constexpr int kSmallThreads = 1024;
constexpr int kPerThread = static_cast<int>(kSmallRow / kSmallThreads);

__global__ void __launch_bounds__(kSmallThreads)
    ArgmaxRowsSmall(const float* __restrict__ x, const float* __restrict__ divisor, int64_t* __restrict__ out,
                    int64_t cols) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  const float* dr = divisor == nullptr ? nullptr : divisor + row * cols;
  float v[kPerThread];
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (j * kSmallThreads >= cols) break;  // the same j in every thread
    const int64_t i = threadIdx.x + j * kSmallThreads;
    v[j] = i >= cols ? 0.0f : dr == nullptr ? xr[i] : xr[i] / fmaxf(dr[i], FLT_MIN);
  }
  uint64_t key = 0;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (j * kSmallThreads >= cols) break;  // the same j in every thread
    const int64_t i = threadIdx.x + j * kSmallThreads;
    if (i < cols) key = MaxKey(key, ArgmaxKey(v[j], static_cast<uint32_t>(i)));
  }
  key = BlockMaxKey<kSmallThreads>(key);
  if (threadIdx.x == 0) out[row] = static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

// One block: see LaunchCutChainAnswer. Every thread reads a and k, so the
// whole block takes the same branch.
__global__ void __launch_bounds__(kSmallThreads)
    CutChainAnswerKernel(const int64_t* __restrict__ answer, const int64_t* __restrict__ kept,
                         const float* __restrict__ rows, int64_t row_count, int64_t cols,
                         const float* __restrict__ noise, int64_t* __restrict__ out) {
  const int64_t a = answer[0], k = kept[0];
  if (a < k) {
    if (threadIdx.x == 0) {
      out[0] = a;
      out[1] = answer[1];
    }
    return;
  }
  const float* xr = rows + (k < 0 ? 0 : k >= row_count ? row_count - 1 : k) * cols;
  uint64_t key = 0;
  for (int64_t i = threadIdx.x; i < cols; i += kSmallThreads) {
    const float v = noise == nullptr ? xr[i] : xr[i] / fmaxf(noise[i], FLT_MIN);
    key = MaxKey(key, ArgmaxKey(v, static_cast<uint32_t>(i)));
  }
  key = BlockMaxKey<kSmallThreads>(key);
  if (threadIdx.x == 0) {
    out[0] = k;
    out[1] = static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
  }
}

// This thread's entries of a row xr [cols] of a one-block-a-row kernel,
// each Tempered by t (-inf past cols), into v; returns their maximum.
__device__ __forceinline__ float LoadRowEntries(const float* xr, int64_t cols, float t, float (&v)[kPerThread]) {
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (j * kSmallThreads >= cols) break;  // the same j in every thread
    const int64_t i = threadIdx.x + j * kSmallThreads;
    v[j] = i < cols ? Tempered(xr[i], t) : -INFINITY;
    m = fmaxf(m, v[j]);
  }
  return m;
}

__global__ void __launch_bounds__(kSmallThreads) SoftmaxRowsSmall(const float* x, float* out, int64_t cols, float t) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float* outr = out + row * cols;
  float v[kPerThread];
  const float m = LoadRowEntries(xr, cols, t, v);
  float s = 0.0f;
  if (m != -INFINITY) {
#pragma unroll
    for (int j = 0; j < kPerThread && j * kSmallThreads < cols; ++j) s += expf(v[j] - m);
  }
  const float2 total = BlockMaxSum<kSmallThreads>(m, s);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (j * kSmallThreads >= cols) break;  // the same j in every thread
    const int64_t i = threadIdx.x + j * kSmallThreads;
    if (i < cols) outr[i] = expf(v[j] - total.x) / total.y;
  }
}

// The softmax summary's sums over x[begin, end), a block of kBlock threads:
// (M, S, E), M the maximum, S the sum of exp(x - M), E the sum of exp(x - M)
// (x - M); -inf entries count for nothing. Each thread's (max, sum) online,
// merged; then the block's E with the merged M. Every thread gets them.
template <int kBlock>
__device__ float3 SummarySums(const float* __restrict__ x, int64_t begin, int64_t end) {
  float m = -INFINITY, s = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += kBlock) {
    const float v = x[i];
    if (v == -INFINITY) continue;
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  const float2 total = BlockMaxSum<kBlock>(m, s);
  float e = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += kBlock) {
    const float v = x[i];
    if (v == -INFINITY) continue;
    const float d = v - total.x;
    e += expf(d) * d;
  }
  return make_float3(total.x, total.y, BlockSumAll<kBlock>(e));
}

// A drafted token's facts from a row's (S, E) and its q: q[token] (1 where q
// is null: an argmax draft's one-hot), the entropy log S - E / S, the top
// probability 1 / S.
__device__ __forceinline__ void WriteFacts(float* out, float s, float e, const float* q, const int64_t* tokens,
                                           int64_t row, int64_t cols) {
  out[3 * row] = q == nullptr ? 1.0f : q[row * cols + tokens[row]];
  out[3 * row + 1] = logf(s) - e / s;
  out[3 * row + 2] = 1.0f / s;
}

// DraftFactsRows for rows up to kSmallRow: one block a row, each thread's
// entries loaded at once into registers (as SoftmaxRowsSmall: the loop of
// SummarySums, each load waiting on the last, took 6 us for 8000 entries).
__global__ void __launch_bounds__(kSmallThreads)
    DraftFactsSmall(const float* __restrict__ x, const float* __restrict__ q, const int64_t* __restrict__ tokens,
                    float* __restrict__ out, int64_t cols) {
  const int64_t row = blockIdx.x;
  float v[kPerThread];
  const float m = LoadRowEntries(x + row * cols, cols, 1.0f, v);
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (j * kSmallThreads >= cols) break;
    if (v[j] != -INFINITY) s += expf(v[j] - m);
  }
  const float2 total = BlockMaxSum<kSmallThreads>(m, s);
  float e = 0.0f;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (j * kSmallThreads >= cols) break;
    if (v[j] == -INFINITY) continue;
    const float d = v[j] - total.x;
    e += expf(d) * d;
  }
  e = BlockSumAll<kSmallThreads>(e);
  if (threadIdx.x == 0) WriteFacts(out, total.y, e, q, tokens, row, cols);
}

// DraftFactsRows for rows past kSmallRow, grid (chunks, rows): each block
// the (M, S, E) of its chunk as SummarySums computes them for a row (M its
// max, S its sum of exp(x - M), E its sum of exp(x - M) (x - M)). A
// 128256-token row took one block 45 us; spread, a few.
__global__ void SoftmaxSummaryChunks(const float* __restrict__ x, float* __restrict__ parts, int64_t cols) {
  const int64_t row = blockIdx.y, chunk = blockIdx.x;
  const int64_t begin = chunk * kRowChunk, end = min(begin + kRowChunk, cols);
  const float3 sums = SummarySums<kThreads>(x + row * cols, begin, end);
  if (threadIdx.x == 0) {
    float* out = parts + 3 * (row * gridDim.x + chunk);
    out[0] = sums.x;
    out[1] = sums.y;
    out[2] = sums.z;
  }
}

// One thread a row: the chunks' (M_c, S_c, E_c) rebased on the row's M:
// S = sum S_c exp(M_c - M), E = sum exp(M_c - M) (E_c + S_c (M_c - M)).
__global__ void DraftFactsMerge(const float* __restrict__ parts, const float* __restrict__ q,
                                const int64_t* __restrict__ tokens, float* __restrict__ out, int64_t rows,
                                int64_t cols, int64_t chunks) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* p = parts + 3 * row * chunks;
  float m = -INFINITY;
  for (int64_t c = 0; c < chunks; ++c) m = fmaxf(m, p[3 * c]);
  float s = 0.0f, e = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) {
    if (p[3 * c] == -INFINITY) continue;  // a chunk of only -inf entries
    const float shift = p[3 * c] - m, scale = expf(shift);
    s += p[3 * c + 1] * scale;
    e += scale * (p[3 * c + 2] + p[3 * c + 1] * shift);
  }
  WriteFacts(out, s, e, q, tokens, row, cols);
}

// A thread's K best keys, sorted (in registers: every index a compile-time
// constant): `key` takes its place among them.
template <int K>
__device__ __forceinline__ void InsertKey(uint64_t (&best)[K], uint64_t key) {
  if (key <= best[K - 1]) return;
  best[K - 1] = key;
#pragma unroll
  for (int b = K - 1; b > 0; --b) {
    if (best[b] > best[b - 1]) {
      const uint64_t t = best[b];
      best[b] = best[b - 1];
      best[b - 1] = t;
    }
  }
}

// The block's best key among the threads' heads, popped from the thread
// that held it (one round of the block-wide top-k; valid in every thread).
template <int K>
__device__ __forceinline__ uint64_t PopBlockBest(uint64_t (&best)[K]) {
  const uint64_t top = BlockMaxKey<kSmallThreads>(best[0]);
  if (best[0] == top) {
#pragma unroll
    for (int b = 0; b < K - 1; ++b) best[b] = best[b + 1];
    best[K - 1] = 0;
  }
  return top;
}

// Grid (splits, rows), kThreads a block: the k best keys of the block's
// chunk of the row and its online (max, sum of exp). Each thread keeps its K
// best keys sorted in registers (every index a compile-time constant), each
// warp merges its lanes' lists in k rounds of a shuffle max, and the block
// ranks its warps' k * 8 candidates by counting (keys are distinct: each
// holds its index). Where the chunk has fewer than k entries, zero keys fill
// its list; they rank below every real key.
template <int K>
__global__ void __launch_bounds__(kThreads)
    TopKLogSoftmaxChunks(const float* __restrict__ x, uint64_t* __restrict__ keys, float2* __restrict__ parts,
                         int64_t cols, int64_t chunk, int k) {
  constexpr int kWarps = kThreads / kWarpSize;
  __shared__ uint64_t candidates[kWarps * K];
  const int64_t row = blockIdx.y, split = blockIdx.x, splits = gridDim.x;
  const int64_t begin = split * chunk, end = min(begin + chunk, cols);
  const float* xr = x + row * cols;
  uint64_t best[K];
#pragma unroll
  for (int j = 0; j < K; ++j) best[j] = 0;
  float m = -INFINITY, s = 0.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = xr[i];
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else if (v != -INFINITY) {
      s += expf(v - m);  // NaN makes the sum NaN, as log_softmax's
    }
    InsertKey(best, ArgmaxKey(v, static_cast<uint32_t>(i)));
  }
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  for (int r = 0; r < k; ++r) {
    uint64_t top = best[0];
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) top = MaxKey(top, __shfl_xor_sync(0xFFFFFFFFu, top, offset));
    if (top != 0 && best[0] == top) {
#pragma unroll
      for (int b = 0; b < K - 1; ++b) best[b] = best[b + 1];
      best[K - 1] = 0;
    }
    if (lane == 0) candidates[warp * k + r] = top;
  }
  const float2 total = BlockMaxSum(m, s);  // synchronises: the candidates are in
  const int n = kWarps * k, c = threadIdx.x;
  if (c < n) {
    int above = 0;
    for (int j = 0; j < n; ++j)
      above += candidates[j] > candidates[c] || (candidates[j] == candidates[c] && j < c);
    if (above < k) keys[(row * splits + split) * k + above] = candidates[c];
  }
  if (threadIdx.x == 0) parts[row * splits + split] = total;
}

// Entries of list[0..n), sorted descending, above `key`.
__device__ __forceinline__ int AboveInSorted(const uint64_t* list, int n, uint64_t key) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (list[mid] > key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// One block per row, kThreads (>= splits * k) threads: the k best of the
// splits' lists (each sorted, best first; a key's rank is its place in its
// list plus the entries above it in the others, by binary search), and the
// row's (max, sum of exp) from the splits'.
__global__ void __launch_bounds__(kThreads)
    TopKLogSoftmaxMerge(const float* __restrict__ x, const uint64_t* __restrict__ keys,
                        const float2* __restrict__ parts, float* __restrict__ values, int64_t* __restrict__ indices,
                        int64_t cols, int splits, int k) {
  __shared__ uint64_t candidates[kThreads];
  const int64_t row = blockIdx.x;
  const int n = splits * k, c = threadIdx.x;
  candidates[c] = c < n ? keys[row * n + c] : 0;
  float m = -INFINITY, s = 0.0f;
  if (c < splits) {
    const float2 part = parts[row * splits + c];
    m = part.x;
    s = part.y;
  }
  const float2 total = BlockMaxSum(m, s);  // synchronises: the candidates are in
  if (c >= n || candidates[c] == 0) return;  // zero keys fill chunks shorter than k
  const int own = c / k;
  int above = c % k;
  for (int list = 0; list < splits && above < k; ++list)
    if (list != own) above += AboveInSorted(candidates + list * k, k, candidates[c]);
  if (above >= k) return;
  const float* xr = x + row * cols;
  const uint32_t index = 0xFFFFFFFFu - static_cast<uint32_t>(candidates[c] & 0xFFFFFFFFu);
  indices[row * k + above] = index;
  values[row * k + above] = xr[index] - total.x - logf(total.y);
}

// One block per row: the k largest x / max(divisor, FLT_MIN) (x alone
// without a divisor), best first, among equal values the smaller index, NaN
// above every number: each thread keeps its K best keys (sorted, in
// registers), then k rounds of a block-wide max over the threads' heads.
template <int K>
__global__ void __launch_bounds__(kSmallThreads)
    TopKRowsKernel(const float* __restrict__ x, const float* __restrict__ divisor, float* __restrict__ values,
                   int64_t* __restrict__ indices, int64_t cols, int k) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  const float* dr = divisor == nullptr ? nullptr : divisor + row * cols;
  uint64_t best[K];
#pragma unroll
  for (int j = 0; j < K; ++j) best[j] = 0;
  for (int64_t i = threadIdx.x; i < cols; i += kSmallThreads) {
    const float v = dr == nullptr ? xr[i] : xr[i] / fmaxf(dr[i], FLT_MIN);
    const uint64_t key = ArgmaxKey(v, static_cast<uint32_t>(i));
    InsertKey(best, key);
  }
  for (int r = 0; r < k; ++r) {
    const uint64_t top = PopBlockBest(best);
    if (threadIdx.x == 0) {
      const uint32_t index = 0xFFFFFFFFu - static_cast<uint32_t>(top & 0xFFFFFFFFu);
      indices[row * k + r] = index;
      values[row * k + r] = dr == nullptr ? xr[index] : xr[index] / fmaxf(dr[index], FLT_MIN);
    }
  }
}

// The order of float32 values as unsigned keys (NaN above every number, -0
// as +0, -inf above 0, which no value maps to), for the selections below.
__device__ __forceinline__ uint32_t OrderKey(float v) {
  const uint32_t bits = __float_as_uint(v + 0.0f);
  return isnan(v) ? 0xFFFFFFFFu : (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

constexpr int kSmallWarps = kSmallThreads / kWarpSize;
constexpr int kMaxCandidates = 256;

// The k-th largest key of a row (k counted with multiplicity) by a radix
// select: 4 passes of 8 bits over a 256-bin shared histogram, each warp
// adding its lanes of one bin with one atomic, one warp finding the digit.
// for_each(body) calls body(i, y, valid) for every entry the thread owns.
template <typename ForEach>
__device__ uint32_t RadixSelectKey(const ForEach& for_each, int64_t k) {
  __shared__ unsigned hist[257];  // bin 256: lanes with nothing to count
  __shared__ uint32_t chosen_prefix;
  __shared__ int64_t chosen_remaining;
  const int lane = threadIdx.x % kWarpSize;
  uint32_t prefix = 0, mask = 0;
  int64_t remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 257; b += kSmallThreads) hist[b] = 0;
    __syncthreads();
    for_each([&](int64_t, float y, bool valid) {
      unsigned bin = 256;
      if (valid) {
        const uint32_t key = OrderKey(y);
        if ((key & mask) == prefix) bin = (key >> shift) & 0xFFu;
      }
      const unsigned peers = __match_any_sync(0xFFFFFFFFu, bin);
      if (lane == __ffs(peers) - 1 && bin < 256) atomicAdd(&hist[bin], static_cast<unsigned>(__popc(peers)));
    });
    __syncthreads();
    // The digit holding the remaining-th largest key: warp 0, lane l over
    // bins 255 - 8l down to 248 - 8l (lane 0 the highest), a scan of the
    // lanes' counts, then the one lane whose bins cross it walks them.
    if (threadIdx.x < kWarpSize) {
      const int top = 255 - 8 * lane;
      int64_t mine = 0;
      for (int b = 0; b < 8; ++b) mine += hist[top - b];
      int64_t above = mine;  // inclusive scan from lane 0
      for (int offset = 1; offset < kWarpSize; offset *= 2) {
        const int64_t before = __shfl_up_sync(0xFFFFFFFFu, above, offset);
        if (lane >= offset) above += before;
      }
      above -= mine;  // keys in the higher lanes' bins
      if (above < remaining && remaining <= above + mine) {
        int d = top;
        for (; d > top - 7 && above + hist[d] < remaining; --d) above += hist[d];
        chosen_prefix = prefix | (static_cast<uint32_t>(d) << shift);
        chosen_remaining = remaining - above;
      }
    }
    __syncthreads();
    prefix = chosen_prefix;
    remaining = chosen_remaining;
    mask |= 0xFFu << shift;
  }
  return prefix;
}

// The top-k softmax of a row from its candidates, when k <= kSmallWarps: the
// k-th largest of the warps' maxima, L, has at least k entries at or above
// it, so the k-th largest entry, T, is at least L, and every kept entry is
// among the entries at or above L (a few times k in a row of logits). Those
// are gathered in shared memory and ranked (by key, then index); the kept
// ones, in rank order, give the sum of exp(y - max) in a fixed order. Returns
// false, with the block in step, where more than kMaxCandidates reach L
// (rows with many ties near the top): the radix select then takes over.
struct KeptRow {
  uint32_t threshold;  // T's key
  float max, sum;      // the largest y and the sum of exp(y - max) over kept y
  // By candidates only (else 0 and null): the kept entries in rank order,
  // their y and their indices (in shared memory).
  int kept;
  const float* ranked;
  const uint32_t* ranked_index;
};

// Candidates ranked by counting take kRankSplit threads each (adjacent lanes
// of one warp, each counting over every kRankSplit-th other): the whole block
// at work, a quarter of the sequential loop.
constexpr int kRankSplit = kSmallThreads / kMaxCandidates;
static_assert(kRankSplit >= 1 && kRankSplit <= kWarpSize && (kRankSplit & (kRankSplit - 1)) == 0,
              "a candidate's counting threads sit in one warp");

// Each thread's candidate c = threadIdx.x / kRankSplit of `order[0..n)`
// (distinct keys, larger ranked first): its rank, valid in the candidate's
// threads (0 for threads past n).
__device__ __forceinline__ int RankByCounting(const uint64_t* order, int n) {
  const int c = threadIdx.x / kRankSplit, part = threadIdx.x % kRankSplit;
  int rank = 0;
  if (c < n) {
    const uint64_t mine = order[c];
    for (int d = part; d < n; d += kRankSplit) rank += order[d] > mine;
  }
  for (int offset = 1; offset < kRankSplit; offset *= 2) rank += __shfl_xor_sync(0xFFFFFFFFu, rank, offset);
  return rank;
}

// A candidate's order: its key, then its index complemented (the smaller
// index ranks first among equal keys), so every candidate's is distinct.
__device__ __forceinline__ uint64_t CandidateOrder(uint32_t key, uint32_t index) {
  return (static_cast<uint64_t>(key) << 32) | (0xFFFFFFFFu - index);
}

template <typename ForEach>
__device__ bool TopKByCandidates(const ForEach& for_each, int64_t k, KeptRow* kept) {
  __shared__ uint32_t warp_max[kSmallWarps];
  __shared__ uint32_t lower;
  __shared__ int count;
  __shared__ uint64_t order[kMaxCandidates];  // CandidateOrder
  __shared__ float values[kMaxCandidates];
  __shared__ float ranked[kMaxCandidates];  // the candidates' y, largest first
  __shared__ uint32_t ranked_index[kMaxCandidates];
  __shared__ KeptRow result;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  uint32_t mine = 0;
  for_each([&](int64_t, float y, bool valid) {
    if (valid) mine = max(mine, OrderKey(y));
  });
  mine = __reduce_max_sync(0xFFFFFFFFu, mine);
  if (lane == 0) warp_max[warp] = mine;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  if (warp == 0) {
    const uint32_t m = warp_max[lane];
    int rank = 0;
    for (int o = 0; o < kSmallWarps; ++o) rank += warp_max[o] > m || (warp_max[o] == m && o < lane);
    if (rank == k - 1) lower = m;
  }
  __syncthreads();
  const uint32_t bound = lower;
  for_each([&](int64_t i, float y, bool valid) {
    const uint32_t key = valid ? OrderKey(y) : 0;
    const bool take = valid && key >= bound;
    const unsigned ballot = __ballot_sync(0xFFFFFFFFu, take);
    if (ballot == 0) return;
    const int leader = __ffs(ballot) - 1;
    int base = 0;
    if (lane == leader) base = atomicAdd(&count, __popc(ballot));
    base = __shfl_sync(0xFFFFFFFFu, base, leader);
    const int slot = base + __popc(ballot & ((1u << lane) - 1u));
    if (take && slot < kMaxCandidates) {
      order[slot] = CandidateOrder(key, static_cast<uint32_t>(i));
      values[slot] = y;
    }
  });
  __syncthreads();
  const int n = count;
  if (n > kMaxCandidates) return false;
  const int rank = RankByCounting(order, n);
  if (const int c = threadIdx.x / kRankSplit; c < n && threadIdx.x % kRankSplit == 0) {
    ranked[rank] = values[c];
    ranked_index[rank] = 0xFFFFFFFFu - static_cast<uint32_t>(order[c]);
    if (rank == k - 1) result.threshold = static_cast<uint32_t>(order[c] >> 32);
  }
  __syncthreads();
  if (warp == 0) {
    // Kept: the ranks whose key is at least T (ties at T included), a prefix.
    const uint32_t threshold = result.threshold;
    int last = -1;
    for (int r = lane; r < n; r += kWarpSize)
      if (OrderKey(ranked[r]) >= threshold) last = r;
    const int kept_n = __reduce_max_sync(0xFFFFFFFFu, last + 1);
    const float m = ranked[0];
    float s = 0.0f;
    for (int r = lane; r < kept_n; r += kWarpSize) s += expf(ranked[r] - m);
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(0xFFFFFFFFu, s, offset);
    if (lane == 0) {
      result.max = m;
      result.sum = s;
      result.kept = kept_n;
      result.ranked = ranked;
      result.ranked_index = ranked_index;
    }
  }
  __syncthreads();
  *kept = result;
  return true;
}

// An entry's key in the exponential race: q / noise, and its index (q = 0
// gives the quotient 0 whatever its noise, which is then not read).
__device__ __forceinline__ uint64_t RaceKey(float q, const float& noise, uint32_t index) {
  return ArgmaxKey(q == 0.0f ? 0.0f : q / fmaxf(noise, FLT_MIN), index);
}

// The race's first `ranks` places of a row kept by candidates, written to
// tokens[0..ranks): the kept entries' keys (q as the row's pass computes it)
// ranked by counting. Every other entry has q = 0 and so the key of the value
// 0, as has a kept entry whose quotient is 0: all those rank below every
// positive key and among themselves by index, so the places past the
// positive keys go to the smallest indices without one. The same places as
// every entry's key ranked in full.
__device__ void RaceKept(const KeptRow& kept, const float* noise, int ranks, int64_t* tokens) {
  __shared__ uint64_t race[kMaxCandidates];  // a positive key, or 0
  __shared__ int positive;
  const uint32_t zero = static_cast<uint32_t>(ArgmaxKey(0.0f, 0) >> 32);
  if (threadIdx.x == 0) positive = 0;
  __syncthreads();
  for (int r = threadIdx.x; r < kept.kept; r += kSmallThreads) {
    const float y = kept.ranked[r];
    const uint32_t index = kept.ranked_index[r];
    const float q = OrderKey(y) < kept.threshold ? 0.0f : expf(y - kept.max) / kept.sum;
    const uint64_t key = RaceKey(q, noise[index], index);
    const bool above = static_cast<uint32_t>(key >> 32) != zero;
    race[r] = above ? key : 0;
    if (above) atomicAdd(&positive, 1);
  }
  __syncthreads();
  const int rank = RankByCounting(race, kept.kept);  // among the positive keys (distinct)
  if (const int c = threadIdx.x / kRankSplit; c < kept.kept && threadIdx.x % kRankSplit == 0 && race[c] != 0 &&
                                              rank < ranks)
    tokens[rank] = static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(race[c] & 0xFFFFFFFFu));
  if (threadIdx.x == 0) {
    int place = positive;
    for (uint32_t index = 0; place < ranks; ++index) {
      bool positive_key = false;
      for (int r = 0; r < kept.kept && !positive_key; ++r)
        positive_key = race[r] != 0 && kept.ranked_index[r] == index;
      if (!positive_key) tokens[place++] = index;
    }
  }
}

// One block per output row b, reading x's row rows[b] (row b where rows is
// null): y = x / t; the softmax of the entries at or above the k-th largest
// (ties kept; every entry where k >= cols) and zeros elsewhere: by
// candidates where k is small, else by a radix select and a pass for the max
// and the sum. With kRanks > 0, also the first `ranks` (<= kRanks) places of
// the exponential race of the row written: TopKRowsKernel's keys over
// out / max(noise, FLT_MIN), with the same divisions, so the same tokens
// (ArgmaxRowsSmall's at one place). An entry of q = 0 has the quotient 0
// whatever its noise, so only the kept entries' noise is read.
// kCached: rows of at most kSmallRow entries, held in registers across the
// passes (loaded once) rather than read again each pass; chunks past the
// row's end are skipped by the whole block alike.
template <bool kCached, int kRanks>
__global__ void __launch_bounds__(kSmallThreads)
    TopKSoftmaxRowsKernel(const float* __restrict__ x, const int64_t* __restrict__ rows, float* __restrict__ out,
                          const float* __restrict__ noise, int64_t* __restrict__ tokens, int64_t cols, int64_t k,
                          float t, int ranks) {
  const float* xr = x + (rows == nullptr ? blockIdx.x : rows[blockIdx.x]) * cols;
  float* outr = out + blockIdx.x * cols;
  float cache[kCached ? kPerThread : 1];
  if constexpr (kCached) {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      if (j * kSmallThreads >= cols) break;  // for_each reads no further
      const int64_t i = threadIdx.x + j * kSmallThreads;
      cache[j] = i < cols ? Tempered(xr[i], t) : 0.0f;
    }
  }
  // body(i, y, valid) for every entry this thread owns, the same number of
  // calls in every thread of the block (warp-wide operations inside).
  const auto for_each = [&](auto&& body) {
    if constexpr (kCached) {
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        if (j * kSmallThreads >= cols) break;
        const int64_t i = threadIdx.x + j * kSmallThreads;
        body(i, cache[j], i < cols);
      }
    } else {
#pragma unroll 4
      for (int64_t base = 0; base < cols; base += kSmallThreads) {
        const int64_t i = base + threadIdx.x;
        body(i, i < cols ? Tempered(xr[i], t) : 0.0f, i < cols);
      }
    }
  };
  KeptRow kept{};
  if (k >= cols || k > kSmallWarps || !TopKByCandidates(for_each, k, &kept)) {
    kept.threshold = k >= cols ? 0u : RadixSelectKey(for_each, k);  // key 0: no value maps to it
    float m = -INFINITY, s = 0.0f;
    for_each([&](int64_t, float y, bool valid) {
      if (!valid || OrderKey(y) < kept.threshold) return;
      if (y > m) {
        s = s * expf(m - y) + 1.0f;
        m = y;
      } else if (y != -INFINITY) {
        s += expf(y - m);
      }
    });
    const float2 total = BlockMaxSum<kSmallThreads>(m, s);
    kept.max = total.x;
    kept.sum = total.y;
  }
  const float* nr = noise == nullptr ? nullptr : noise + blockIdx.x * cols;  // read only with kRanks > 0
  // By candidates, every entry of nonzero q is a ranked candidate: the race
  // ranks those alone (RaceKept); else each thread keeps its best keys.
  const bool race_kept = kept.ranked != nullptr;
  uint64_t best[kRanks > 0 ? kRanks : 1];
#pragma unroll
  for (int j = 0; j < (kRanks > 0 ? kRanks : 1); ++j) best[j] = 0;
  for_each([&](int64_t i, float y, bool valid) {
    if (!valid) return;
    const float q = OrderKey(y) < kept.threshold ? 0.0f : expf(y - kept.max) / kept.sum;
    outr[i] = q;
    if constexpr (kRanks > 0)
      if (!race_kept) InsertKey(best, RaceKey(q, nr[i], static_cast<uint32_t>(i)));
  });
  if constexpr (kRanks > 0) {
    if (race_kept) {
      RaceKept(kept, nr, ranks, tokens + blockIdx.x * ranks);
      return;
    }
    for (int r = 0; r < ranks; ++r) {
      const uint64_t top = PopBlockBest(best);
      if (threadIdx.x == 0)
        tokens[blockIdx.x * ranks + r] = static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(top & 0xFFFFFFFFu));
    }
  }
}

}  // namespace

int LaunchTopKRows(const float* x, const float* divisor, float* values, int64_t* indices, int64_t rows, int64_t cols,
                   int k, void* stream) {
  if (rows < 1 || rows > 65535 || k < 1 || k > 32 || cols < k || cols >= (int64_t{1} << 32)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  const auto grid = static_cast<unsigned>(rows);
  if (k <= 4) {
    TopKRowsKernel<4><<<grid, kSmallThreads, 0, s>>>(x, divisor, values, indices, cols, k);
  } else if (k <= 8) {
    TopKRowsKernel<8><<<grid, kSmallThreads, 0, s>>>(x, divisor, values, indices, cols, k);
  } else if (k <= 16) {
    TopKRowsKernel<16><<<grid, kSmallThreads, 0, s>>>(x, divisor, values, indices, cols, k);
  } else {
    TopKRowsKernel<32><<<grid, kSmallThreads, 0, s>>>(x, divisor, values, indices, cols, k);
  }
  return cudaGetLastError();
}

int LaunchTopKSoftmaxRows(const float* x, float* out, int64_t rows, int64_t cols, int64_t k, float temperature,
                          void* stream) {
  if (k > cols) return cudaErrorInvalidValue;
  return LaunchTopKSoftmaxRace(x, nullptr, nullptr, out, nullptr, rows, cols, k, temperature, 0, stream);
}

namespace {

template <bool kCached>
void LaunchTopKSoftmaxRanks(const float* x, const int64_t* rows, const float* noise, float* out, int64_t* tokens,
                            int64_t n, int64_t cols, int64_t k, float t, int ranks, cudaStream_t s) {
  const auto grid = static_cast<unsigned>(n);
  if (ranks == 0) {
    TopKSoftmaxRowsKernel<kCached, 0><<<grid, kSmallThreads, 0, s>>>(x, rows, out, noise, tokens, cols, k, t, ranks);
  } else if (ranks == 1) {
    TopKSoftmaxRowsKernel<kCached, 1><<<grid, kSmallThreads, 0, s>>>(x, rows, out, noise, tokens, cols, k, t, ranks);
  } else if (ranks <= 4) {
    TopKSoftmaxRowsKernel<kCached, 4><<<grid, kSmallThreads, 0, s>>>(x, rows, out, noise, tokens, cols, k, t, ranks);
  } else if (ranks <= 8) {
    TopKSoftmaxRowsKernel<kCached, 8><<<grid, kSmallThreads, 0, s>>>(x, rows, out, noise, tokens, cols, k, t, ranks);
  } else if (ranks <= 16) {
    TopKSoftmaxRowsKernel<kCached, 16><<<grid, kSmallThreads, 0, s>>>(x, rows, out, noise, tokens, cols, k, t, ranks);
  } else {
    TopKSoftmaxRowsKernel<kCached, 32><<<grid, kSmallThreads, 0, s>>>(x, rows, out, noise, tokens, cols, k, t, ranks);
  }
}

}  // namespace

int LaunchTopKSoftmaxRace(const float* x, const int64_t* rows, const float* noise, float* out, int64_t* tokens,
                          int64_t n, int64_t cols, int64_t k, float temperature, int ranks, void* stream) {
  if (n < 1 || n > 65535 || k < 1 || cols >= (int64_t{1} << 32) || !(temperature > 0) || ranks < 0 ||
      ranks > 32 || ranks > cols || (ranks > 0 && (noise == nullptr || tokens == nullptr)))
    return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  if (cols <= kSmallRow) {
    LaunchTopKSoftmaxRanks<true>(x, rows, noise, out, tokens, n, cols, k, temperature, ranks, s);
  } else {
    LaunchTopKSoftmaxRanks<false>(x, rows, noise, out, tokens, n, cols, k, temperature, ranks, s);
  }
  return cudaGetLastError();
}

int LaunchArgmaxRows(const float* x, const float* divisor, int64_t* out, uint64_t* workspace, int64_t rows,
                     int64_t cols, void* stream) {
  if (rows < 1 || cols < 1 || cols >= (int64_t{1} << 32) || rows > 65535) return cudaErrorInvalidValue;
  const int64_t chunks = RowChunks(cols);
  auto s = static_cast<cudaStream_t>(stream);
  if (cols <= kSmallRow) {
    ArgmaxRowsSmall<<<static_cast<unsigned>(rows), kSmallThreads, 0, s>>>(x, divisor, out, cols);
    return cudaGetLastError();
  }
  ArgmaxChunks<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)), kThreads, 0, s>>>(
      x, divisor, workspace, cols);
  ArgmaxMerge<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(workspace, out, chunks);
  return cudaGetLastError();
}

int LaunchCutChainAnswer(const int64_t* answer, const int64_t* kept, const float* rows, int64_t row_count,
                         int64_t cols, const float* noise, int64_t* out, void* stream) {
  if (row_count < 1 || cols < 1 || cols >= (int64_t{1} << 32)) return cudaErrorInvalidValue;
  CutChainAnswerKernel<<<1, kSmallThreads, 0, static_cast<cudaStream_t>(stream)>>>(answer, kept, rows, row_count,
                                                                                  cols, noise, out);
  return cudaGetLastError();
}

int LaunchSoftmaxRows(const float* x, float* out, float* workspace, int64_t rows, int64_t cols, float temperature,
                      void* stream) {
  if (rows < 1 || cols < 1 || rows > 65535 || !(temperature > 0)) return cudaErrorInvalidValue;
  const int64_t chunks = RowChunks(cols);
  auto s = static_cast<cudaStream_t>(stream);
  if (cols <= kSmallRow) {
    SoftmaxRowsSmall<<<static_cast<unsigned>(rows), kSmallThreads, 0, s>>>(x, out, cols, temperature);
    return cudaGetLastError();
  }
  auto* parts = reinterpret_cast<float2*>(workspace);
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(rows));
  SoftmaxChunks<<<grid, kThreads, 0, s>>>(x, parts, cols, temperature);
  SoftmaxNormalize<<<grid, kThreads, 0, s>>>(x, parts, out, cols, temperature);
  return cudaGetLastError();
}

int LaunchDraftFactsRows(const float* x, const float* q, const int64_t* tokens, float* out, float* workspace,
                         int64_t rows, int64_t cols, void* stream) {
  if (rows < 1 || cols < 1 || rows > 65535 || (q != nullptr && tokens == nullptr)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  if (cols <= kSmallRow) {
    DraftFactsSmall<<<static_cast<unsigned>(rows), kSmallThreads, 0, s>>>(x, q, tokens, out, cols);
    return cudaGetLastError();
  }
  const int64_t chunks = RowChunks(cols);
  SoftmaxSummaryChunks<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)), kThreads, 0, s>>>(
      x, workspace, cols);
  DraftFactsMerge<<<static_cast<unsigned>((rows + 31) / 32), 32, 0, s>>>(workspace, q, tokens, out, rows, cols,
                                                                         chunks);
  return cudaGetLastError();
}

int LaunchTopKLogSoftmax(const float* x, float* values, int64_t* indices, uint64_t* workspace_keys,
                         float* workspace_parts, int64_t rows, int64_t cols, int k, void* stream) {
  if (rows < 1 || rows > 65535 || k < 1 || k > 32 || cols < k || cols >= (int64_t{1} << 32)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t splits = TopKLogSoftmaxSplits(cols, k), chunk = (cols + splits - 1) / splits;
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(rows));
  auto* parts = reinterpret_cast<float2*>(workspace_parts);
  if (k <= 4) {
    TopKLogSoftmaxChunks<4><<<grid, kThreads, 0, s>>>(x, workspace_keys, parts, cols, chunk, k);
  } else if (k <= 8) {
    TopKLogSoftmaxChunks<8><<<grid, kThreads, 0, s>>>(x, workspace_keys, parts, cols, chunk, k);
  } else if (k <= 16) {
    TopKLogSoftmaxChunks<16><<<grid, kThreads, 0, s>>>(x, workspace_keys, parts, cols, chunk, k);
  } else {
    TopKLogSoftmaxChunks<32><<<grid, kThreads, 0, s>>>(x, workspace_keys, parts, cols, chunk, k);
  }
  TopKLogSoftmaxMerge<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
      x, workspace_keys, parts, values, indices, cols, static_cast<int>(splits), k);
  return cudaGetLastError();
}

}  // namespace row_kernels
}  // namespace speclab
