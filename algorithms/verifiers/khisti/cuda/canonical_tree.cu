// See canonical_tree.h; the host twin in ../khisti_device.cc does the same arithmetic.
#include "algorithms/verifiers/khisti/cuda/canonical_tree.h"

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace canonical_kernels {
namespace {

using namespace row_reduce;  // NOLINT: the row kernels' shared reductions

constexpr int kBlock = 1024;
constexpr int kWarps = kBlock / kWarpSize;
// r(y) is summed by one block of kLawLanes threads a y: each sums every
// kLawLanes-th tail tuple, then the block's butterfly adds the partial sums
// (the host twin, ../khisti_device.cc, adds them in the same order).
constexpr int kLawLanes = 256;
constexpr int kLawBlocksPerNode = 32;

__device__ int64_t TokenOfKey(uint64_t key) {
  return static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

// The exponential race over p's row, for nodes that stop without a residual.
__device__ void RaceTarget(const float* pu, const float* noise, int64_t vocab, int64_t* extra) {
  uint64_t key = 0;
  for (int64_t x = threadIdx.x; x < vocab; x += kBlock)
    key = MaxKey(key, ArgmaxKey(pu[x] / fmaxf(noise[x], FLT_MIN), static_cast<uint32_t>(x)));
  key = BlockMaxKey<kBlock>(key);
  if (threadIdx.x == 0) *extra = TokenOfKey(key);
}

// One partial sum of r(y = support[j]) / (K q(y)): tails lane, lane +
// kLawLanes, ... of the K - 1 other draws, their base-s digits (least
// significant first) kept as an odometer advanced by kLawLanes, in 32-bit
// arithmetic (tails <= max_selection_tuples / s, checked by the caller;
// digits past the last tail's may wrap, as the loop has ended by then). kK
// is the draft count where known at compile time (the digits then live in
// registers), else kMaxDrafts with the count in `k`; the arithmetic is the
// same either way.
template <int kK>
__device__ __forceinline__ float TailSum(int j, int lane, int s, int tails, const float* support_q,
                                         const float* support_w, int k = kK) {
  float acc = 0.0f;
  // The odometer: t's digits, and kLawLanes' (its step), so that each step
  // adds digit by digit with a carry bit, without dividing.
  int digits[kK - 1], step[kK - 1];
#pragma unroll
  for (int i = 0; i + 1 < kK; ++i) digits[i] = step[i] = 0;
  {
    int rest = lane, lanes = kLawLanes;
#pragma unroll
    for (int i = 0; i + 1 < kK; ++i) {
      if (i + 1 >= k) break;
      digits[i] = rest % s;
      rest /= s;
      step[i] = lanes % s;
      lanes /= s;
    }
  }
  for (int t = lane; t < tails; t += kLawLanes) {
    float probability = 1.0f, weights = support_w[j];
    int distinct = 1, copies = 1;
#pragma unroll
    for (int i = 0; i + 1 < kK; ++i) {
      if (i + 1 >= k) break;
      const int d = digits[i];
      probability *= support_q[d];
      if (d == j) {
        ++copies;
        continue;
      }
      bool seen = false;
#pragma unroll
      for (int e = 0; e < i; ++e) seen = seen || digits[e] == d;
      if (!seen) {
        ++distinct;
        weights += support_w[d];
      }
    }
    const float alpha = weights > 0.0f ? support_w[j] / weights : 1.0f / static_cast<float>(distinct);
    acc += probability * alpha / static_cast<float>(copies);
    int carry = 0;
#pragma unroll
    for (int i = 0; i + 1 < kK; ++i) {
      if (i + 1 >= k) break;
      const int v = digits[i] + step[i] + carry;
      carry = v >= s;
      digits[i] = carry ? v - s : v;
    }
  }
  return acc;
}

// The exclusive prefix sum of v over a block of kThreadsIn threads (a
// multiple of 32, at most 1024), in thread order; *total gets the sum.
template <int kThreadsIn>
__device__ int ScanBlock(int v, int* total) {
  constexpr int kWarpsIn = kThreadsIn / kWarpSize;
  __shared__ int warp_totals[kWarps];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  int inclusive = v;
  for (int offset = 1; offset < kWarpSize; offset *= 2) {
    const int before = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
    if (lane >= offset) inclusive += before;
  }
  if (lane == kWarpSize - 1) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int t = lane < kWarpsIn ? warp_totals[lane] : 0;
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
      const int before = __shfl_up_sync(0xFFFFFFFFu, t, offset);
      if (lane >= offset) t += before;
    }
    if (lane < kWarpsIn) warp_totals[lane] = t;
  }
  __syncthreads();
  const int base = warp > 0 ? warp_totals[warp - 1] : 0;
  *total = warp_totals[kWarpsIn - 1];
  __syncthreads();  // warp_totals may be reused by a later call
  return base + inclusive - v;
}

// Node u's children, in index order, into kids; returns how many. Every
// thread of the block (kThreadsIn of them) gets the count. Children follow
// their parent: the block reads parents[u + 1 ..] a tile at a time.
template <int kThreadsIn>
__device__ int ChildrenOf(const int64_t* parents, int u, int n, int* kids) {
  int count = 0;
  for (int base = u + 1; base < n; base += kThreadsIn) {
    const int c = base + threadIdx.x;
    const bool kid = c < n && parents[c] == u;
    int tile = 0;
    const int at = ScanBlock<kThreadsIn>(kid ? 1 : 0, &tile);
    if (kid) kids[count + at] = c;
    count += tile;
  }
  __syncthreads();
  return count;
}

// q's support (its row qs) in index order, with q and the importance weights
// p/q, into shared memory; *size gets its size. False (nothing written past
// the size) where K drafts over it exceed what the exact law can take here.
template <int kThreadsIn>
__device__ bool LoadSupport(const float* qs, const float* pu, int64_t vocab, int k, double max_selection_tuples,
                            int* support, float* support_q, float* support_w, int* size) {
  const int64_t chunk = (vocab + kThreadsIn - 1) / kThreadsIn, begin = threadIdx.x * chunk;
  const int64_t end = begin + chunk < vocab ? begin + chunk : vocab;
  int mine = 0;
  for (int64_t x = begin; x < end; ++x) mine += qs[x] > 0.0f;
  int total = 0;
  int at = ScanBlock<kThreadsIn>(mine, &total);
  *size = total;
  const int s = total;
  // (The tail tuples are counted in 32-bit integers: s^(k-1) < 2^31.)
  if (k > kMaxDrafts || s > kMaxSupport || pow(static_cast<double>(s), k) > max_selection_tuples ||
      pow(static_cast<double>(s), k - 1) >= 2147483648.0)
    return false;
  for (int64_t x = begin; x < end; ++x) {
    if (qs[x] > 0.0f) {
      support[at] = static_cast<int>(x);
      support_q[at] = qs[x];
      support_w[at] = pu[x] / qs[x];
      ++at;
    }
  }
  __syncthreads();
  return true;
}

// r on the support of every node with K >= 2 drafts, into laws[u][j]:
// r(y) = K q(y) Σ_tails Π q(tail) α(y | y, tail) / c_y (exchangeability: the
// K-tuples holding y, counted through their first draw). Block (u, g)
// takes y = support[j] for j = g, g + kLawBlocksPerNode, ...; its kLawLanes
// threads each sum a share of the tails (TailSum), and the block's butterfly
// adds their sums: offsets 128, 64, 32 through shared memory, then the warps'
// shuffles.
__global__ void __launch_bounds__(kLawLanes) SupportLaws(const int64_t* __restrict__ parents,
                                                         const float* __restrict__ p, const float* __restrict__ q,
                                                         double max_selection_tuples, float* __restrict__ laws,
                                                         int n, int64_t vocab) {
  __shared__ int kids[kMaxNodes];
  __shared__ int support[kMaxSupport];
  __shared__ float support_q[kMaxSupport], support_w[kMaxSupport];
  __shared__ float partial[kLawLanes];
  const int u = blockIdx.x;
  const int k = ChildrenOf<kLawLanes>(parents, u, n, kids);
  if (k < 2) return;
  int s = 0;
  if (!LoadSupport<kLawLanes>(q + kids[0] * vocab, p + u * vocab, vocab, k, max_selection_tuples, support, support_q,
                              support_w, &s))
    return;
  int tails = 1;
  for (int i = 1; i < k; ++i) tails *= s;
  const int lane = threadIdx.x;
  for (int j = blockIdx.y; j < s; j += gridDim.y) {
    float acc;
    switch (k) {
      case 2: acc = TailSum<2>(j, lane, s, tails, support_q, support_w); break;
      case 3: acc = TailSum<3>(j, lane, s, tails, support_q, support_w); break;
      case 4: acc = TailSum<4>(j, lane, s, tails, support_q, support_w); break;
      case 5: acc = TailSum<5>(j, lane, s, tails, support_q, support_w); break;
      case 6: acc = TailSum<6>(j, lane, s, tails, support_q, support_w); break;
      case 7: acc = TailSum<7>(j, lane, s, tails, support_q, support_w); break;
      case 8: acc = TailSum<8>(j, lane, s, tails, support_q, support_w); break;
      default: acc = TailSum<kMaxDrafts>(j, lane, s, tails, support_q, support_w, k); break;
    }
    for (int offset = kLawLanes / 2; offset >= kWarpSize; offset /= 2) {
      partial[lane] = acc;
      __syncthreads();
      acc += partial[lane ^ offset];
      __syncthreads();
    }
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, offset);
    if (lane == 0) laws[u * kMaxSupport + j] = __fmul_rn(__fmul_rn(static_cast<float>(k), support_q[j]), acc);
  }
}

__global__ void __launch_bounds__(kBlock) DecideNodes(const int64_t* __restrict__ parents, const int64_t* __restrict__ tokens,
                            const float* __restrict__ p, const float* __restrict__ q,
                            const float* __restrict__ uniforms, const float* __restrict__ noise,
                            double max_selection_tuples, const float* __restrict__ laws,
                            int64_t* __restrict__ decision, int64_t* __restrict__ extra, int n, int64_t vocab) {
  __shared__ int kids[kMaxNodes];
  __shared__ int support[kMaxSupport];
  __shared__ float support_q[kMaxSupport], support_w[kMaxSupport], law[kMaxSupport];
  __shared__ int size, chosen;
  const int u = blockIdx.x;
  const int k = ChildrenOf<kBlock>(parents, u, n, kids);
  const float* pu = p + u * vocab;
  if (k == 0) {
    RaceTarget(pu, noise, vocab, &extra[u]);
    if (threadIdx.x == 0) decision[u] = -1;
    return;
  }
  const float* qs = q + kids[0] * vocab;
  if (k >= 2) {
    if (!LoadSupport<kBlock>(qs, pu, vocab, k, max_selection_tuples, support, support_q, support_w, &size)) {
      // Beyond what this block can hold exactly: stop here, emitting a token
      // drawn from p (exact; the host refuses such trees where it can see them).
      RaceTarget(pu, noise, vocab, &extra[u]);
      if (threadIdx.x == 0) decision[u] = -1;
      return;
    }
    for (int j = threadIdx.x; j < size; j += kBlock) law[j] = laws[u * kMaxSupport + j];  // SupportLaws'
    __syncthreads();
  }
  // Step 1, the selection among the distinct drafted tokens (α ∝ p/q, uniform
  // where every weight is 0); step 2, SpS of the selected token against r.
  if (threadIdx.x == 0) {
    int64_t distinct[kMaxNodes];
    float weight[kMaxNodes];
    int m = 0;
    float total = 0.0f;
    for (int i = 0; i < k; ++i) {
      const int64_t x = tokens[kids[i]];
      bool seen = false;
      for (int e = 0; e < m && !seen; ++e) seen = distinct[e] == x;
      if (seen) continue;
      distinct[m] = x;
      weight[m] = qs[x] > 0.0f ? pu[x] / qs[x] : 0.0f;
      total += weight[m++];
    }
    if (!(total > 0.0f)) {
      for (int e = 0; e < m; ++e) weight[e] = 1.0f;
      total = static_cast<float>(m);
    }
    const float target = uniforms[2 * u] * total;
    int pick = m - 1;
    float cumulative = 0.0f;
    for (int e = 0; e < m; ++e) {
      cumulative += weight[e];
      if (target < cumulative) {
        pick = e;
        break;
      }
    }
    const int64_t y = distinct[pick];
    float r = 0.0f;
    if (k == 1) {
      r = qs[y];
    } else {
      for (int j = 0; j < size; ++j)
        if (support[j] == y) r = law[j];
    }
    chosen = -1;
    if (pu[y] > 0.0f && r > 0.0f && __fmul_rn(uniforms[2 * u + 1], r) < pu[y])
      for (int i = 0; i < k && chosen < 0; ++i)
        if (tokens[kids[i]] == y) chosen = kids[i];
    decision[u] = chosen;
  }
  __syncthreads();
  if (chosen >= 0) return;
  // Stopping here: the extra token from (p - r)+ (r = q at K = 1), or from
  // p where rounding left that no mass.
  float mass = 0.0f;
  uint64_t on_residual = 0, on_target = 0;
  for (int64_t x = threadIdx.x; x < vocab; x += kBlock) {
    const float px = pu[x], e = fmaxf(noise[x], FLT_MIN);
    on_target = MaxKey(on_target, ArgmaxKey(px / e, static_cast<uint32_t>(x)));
    if (k >= 2 && qs[x] > 0.0f) continue;  // on the support: below
    const float r = k == 1 ? fmaxf(__fsub_rn(px, qs[x]), 0.0f) : px;
    mass += r;
    on_residual = MaxKey(on_residual, ArgmaxKey(r / e, static_cast<uint32_t>(x)));
  }
  if (k >= 2) {
    for (int j = threadIdx.x; j < size; j += kBlock) {
      const int64_t y = support[j];
      const float r = fmaxf(__fsub_rn(pu[y], law[j]), 0.0f);
      mass += r;
      on_residual = MaxKey(on_residual, ArgmaxKey(r / fmaxf(noise[y], FLT_MIN), static_cast<uint32_t>(y)));
    }
  }
  mass = BlockSumAll<kBlock>(mass);
  on_residual = BlockMaxKey<kBlock>(on_residual);
  on_target = BlockMaxKey<kBlock>(on_target);
  if (threadIdx.x == 0) extra[u] = TokenOfKey(mass > 0.0f ? on_residual : on_target);
}

__global__ void WalkDecisions(const int64_t* __restrict__ decision, const int64_t* __restrict__ extra,
                              int64_t* __restrict__ out, int n) {
  int node = 0, accepted = 0;
  for (int i = 1; i < n; ++i) out[i] = 0;
  while (decision[node] >= 0) {
    node = static_cast<int>(decision[node]);
    out[++accepted] = node;
  }
  out[0] = accepted;
  out[n] = extra[node];
}

}  // namespace

int LaunchCanonicalTree(const int64_t* parents, const int64_t* tokens, const float* p, const float* q,
                        const float* uniforms, const float* noise, double max_selection_tuples, float* laws,
                        int64_t* decision, int64_t* extra, int64_t* out, int64_t n, int64_t vocab, void* stream) {
  if (n < 1 || n > kMaxNodes || vocab < 1 || vocab >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  SupportLaws<<<dim3(static_cast<unsigned>(n), kLawBlocksPerNode), kLawLanes, 0, s>>>(
      parents, p, q, max_selection_tuples, laws, static_cast<int>(n), vocab);
  DecideNodes<<<static_cast<unsigned>(n), kBlock, 0, s>>>(parents, tokens, p, q, uniforms, noise,
                                                            max_selection_tuples, laws, decision, extra,
                                                            static_cast<int>(n), vocab);
  WalkDecisions<<<1, 1, 0, s>>>(decision, extra, out, static_cast<int>(n));
  return cudaGetLastError();
}

}  // namespace canonical_kernels
}  // namespace speclab
