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

// The exclusive prefix sum of v over the block, in thread order; *total gets the sum.
__device__ int BlockExclusiveScan(int v, int* total) {
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
    int t = warp_totals[lane];
    for (int offset = 1; offset < kWarpSize; offset *= 2) {
      const int before = __shfl_up_sync(0xFFFFFFFFu, t, offset);
      if (lane >= offset) t += before;
    }
    warp_totals[lane] = t;
  }
  __syncthreads();
  const int base = warp > 0 ? warp_totals[warp - 1] : 0;
  *total = warp_totals[kWarps - 1];
  __syncthreads();  // warp_totals may be reused by a later call
  return base + inclusive - v;
}

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

__global__ void __launch_bounds__(kBlock) DecideNodes(const int64_t* __restrict__ parents, const int64_t* __restrict__ tokens,
                            const float* __restrict__ p, const float* __restrict__ q,
                            const float* __restrict__ uniforms, const float* __restrict__ noise,
                            double max_selection_tuples, int64_t* __restrict__ decision,
                            int64_t* __restrict__ extra, int n, int64_t vocab) {
  __shared__ int kids[kMaxNodes];
  __shared__ int support[kMaxSupport];
  __shared__ float support_q[kMaxSupport], support_w[kMaxSupport], law[kMaxSupport];
  __shared__ int count, size, chosen;
  const int u = blockIdx.x;
  if (threadIdx.x == 0) {
    count = 0;
    for (int c = u + 1; c < n; ++c)
      if (parents[c] == u) kids[count++] = c;
  }
  __syncthreads();
  const int k = count;
  const float* pu = p + u * vocab;
  if (k == 0) {
    RaceTarget(pu, noise, vocab, &extra[u]);
    if (threadIdx.x == 0) decision[u] = -1;
    return;
  }
  const float* qs = q + kids[0] * vocab;
  if (k >= 2) {
    // q's support in index order, with q and the importance weights p/q.
    const int64_t chunk = (vocab + kBlock - 1) / kBlock, begin = threadIdx.x * chunk;
    const int64_t end = begin + chunk < vocab ? begin + chunk : vocab;
    int mine = 0;
    for (int64_t x = begin; x < end; ++x) mine += qs[x] > 0.0f;
    int at = BlockExclusiveScan(mine, &size);
    const int s = size;
    // (The tail tuples are counted in 32-bit integers: s^(k-1) < 2^31.)
    if (k > kMaxDrafts || s > kMaxSupport || pow(static_cast<double>(s), k) > max_selection_tuples ||
        pow(static_cast<double>(s), k - 1) >= 2147483648.0) {
      // Beyond what this block can hold exactly: stop here, emitting a token
      // drawn from p (exact; the host refuses such trees where it can see them).
      RaceTarget(pu, noise, vocab, &extra[u]);
      if (threadIdx.x == 0) decision[u] = -1;
      return;
    }
    for (int64_t x = begin; x < end; ++x) {
      if (qs[x] > 0.0f) {
        support[at] = static_cast<int>(x);
        support_q[at] = qs[x];
        support_w[at] = pu[x] / qs[x];
        ++at;
      }
    }
    __syncthreads();
    // r(y) = K q(y) Σ_tails Π q(tail) α(y | y, tail) / c_y (exchangeability:
    // the K-tuples holding y, counted through their first draw). A warp a y.
    // A lane takes tails lane, lane + 32, ...: their base-s digits (least
    // significant first) kept as an odometer advanced by 32, in 32-bit
    // arithmetic (tails <= max_selection_tuples / s, checked above).
    int tails = 1;
    for (int i = 1; i < k; ++i) tails *= s;
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    for (int j = warp; j < s; j += kWarps) {
      float acc = 0.0f;
      int digits[kMaxDrafts];
      for (int i = 0, rest = lane; i + 1 < k; ++i, rest /= s) digits[i] = rest % s;
      for (int t = lane; t < tails; t += kWarpSize) {
        float probability = 1.0f, weights = support_w[j];
        int distinct = 1, copies = 1;
        for (int i = 0; i + 1 < k; ++i) {
          const int d = digits[i];
          probability *= support_q[d];
          if (d == j) {
            ++copies;
            continue;
          }
          bool seen = false;
          for (int e = 0; e < i && !seen; ++e) seen = digits[e] == d;
          if (!seen) {
            ++distinct;
            weights += support_w[d];
          }
        }
        const float alpha = weights > 0.0f ? support_w[j] / weights : 1.0f / static_cast<float>(distinct);
        acc += probability * alpha / static_cast<float>(copies);
        for (int i = 0, carry = kWarpSize; i + 1 < k && carry > 0; ++i) {
          const int v = digits[i] + carry;
          digits[i] = v % s;
          carry = v / s;
        }
      }
      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xFFFFFFFFu, acc, offset);
      if (lane == 0) law[j] = __fmul_rn(__fmul_rn(static_cast<float>(k), support_q[j]), acc);
    }
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
                        const float* uniforms, const float* noise, double max_selection_tuples, int64_t* decision,
                        int64_t* extra, int64_t* out, int64_t n, int64_t vocab, void* stream) {
  if (n < 1 || n > kMaxNodes || vocab < 1 || vocab >= (int64_t{1} << 31)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  DecideNodes<<<static_cast<unsigned>(n), kBlock, 0, s>>>(parents, tokens, p, q, uniforms, noise,
                                                            max_selection_tuples, decision, extra,
                                                            static_cast<int>(n), vocab);
  WalkDecisions<<<1, 1, 0, s>>>(decision, extra, out, static_cast<int>(n));
  return cudaGetLastError();
}

}  // namespace canonical_kernels
}  // namespace speclab
