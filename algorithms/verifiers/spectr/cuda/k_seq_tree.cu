// See k_seq_tree.h; the host twin in ../spectr_device.cc does the same arithmetic.
#include "algorithms/verifiers/spectr/cuda/k_seq_tree.h"

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace k_seq_kernels {
namespace {

using namespace row_reduce;  // NOLINT: the row kernels' shared reductions

constexpr int kBlock = 1024;  // a few blocks carry the whole step: make each wide

// rep[c]: the first node whose path of tokens equals c's (its group: the
// nodes carrying one prefix, whose children are that prefix's candidates).
// Depth by depth, so that a node's parent's group is known.
__device__ void GroupNodes(const int64_t* parents, const int64_t* tokens, int n, int* rep, int* depth) {
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    int d = 0;
    for (int64_t u = c; u > 0; u = parents[u]) ++d;
    depth[c] = d;
  }
  if (threadIdx.x == 0) rep[0] = 0;
  __syncthreads();
  for (int d = 1;; ++d) {
    int here = 0;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
      if (depth[c] != d) continue;
      here = 1;
      const int up = rep[parents[c]];
      int first = c;
      for (int e = 1; e < c; ++e) {
        if (depth[e] == d && rep[parents[e]] == up && tokens[e] == tokens[c]) {
          first = e;
          break;
        }
      }
      rep[c] = first;
    }
    if (!__syncthreads_or(here)) break;
  }
}

// Positive where ρ is too small: 1 - (1 - β)^k - ρ β.
__device__ double Violation(float beta, int k, double rho) {
  return 1.0 - pow(1.0 - static_cast<double>(beta), k) - rho * static_cast<double>(beta);
}

// The first of the kGrid points lo + (hi - lo) j / kGrid where ρ is valid
// (-1 if none), from every thread's partial sums of β there: each warp
// reduces its lanes', then warp j sums point j's over the warps and tests it
// (one pow a point, not one a thread). The same answer in every thread.
__device__ int FirstValidPoint(float (&beta)[kGrid], int k, double lo, double hi) {
  __shared__ float partial[kBlock / kWarpSize][kGrid];
  __shared__ int valid_at[kGrid];
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  for (int j = 0; j < kGrid; ++j)
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) beta[j] += __shfl_xor_sync(0xFFFFFFFFu, beta[j], offset);
  if (lane == 0)
    for (int j = 0; j < kGrid; ++j) partial[warp][j] = beta[j];
  __syncthreads();
  static_assert(kGrid <= kBlock / kWarpSize && kBlock / kWarpSize == kWarpSize, "a warp a point, a lane a warp");
  if (warp < kGrid) {
    float sum = partial[lane][warp];
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, offset);
    if (lane == 0) valid_at[warp] = Violation(sum, k, lo + (hi - lo) * warp / kGrid) <= 0.0;
  }
  __syncthreads();
  for (int j = 0; j < kGrid; ++j)
    if (valid_at[j]) return j;
  return -1;
}

// The smallest valid ρ in [1, k], to the bracket's width, on its valid side.
__device__ float KSeqRho(const float* p, const float* q, int k, int64_t vocab) {
  if (k <= 1) return 1.0f;
  double lo = 1.0, hi = static_cast<double>(k);
  for (int pass = 0; pass < kPasses; ++pass) {
    float inv[kGrid], beta[kGrid];
    for (int j = 0; j < kGrid; ++j) {
      inv[j] = 1.0f / static_cast<float>(lo + (hi - lo) * j / kGrid);
      beta[j] = 0.0f;
    }
    for (int64_t x = threadIdx.x; x < vocab; x += kBlock) {
      const float px = p[x], qx = q[x];
      if (qx > 0.0f)
        for (int j = 0; j < kGrid; ++j) beta[j] += fminf(qx, __fmul_rn(px, inv[j]));
    }
    const int valid = FirstValidPoint(beta, k, lo, hi);  // the same in every thread
    if (valid < 0) {
      lo = lo + (hi - lo) * (kGrid - 1) / kGrid;
      continue;
    }
    const double next_hi = lo + (hi - lo) * valid / kGrid;
    if (valid == 0) return static_cast<float>(next_hi);
    lo = lo + (hi - lo) * (valid - 1) / kGrid;
    hi = next_hi;
  }
  return static_cast<float>(hi);
}

__device__ int64_t TokenOfKey(uint64_t key) {
  return static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

// One block a group: its candidates (the children of its nodes, in index
// order) against the group's p row and the first candidate's q row; the
// token it emits if the walk stops there.
__global__ void __launch_bounds__(kBlock) DecideGroups(const int64_t* __restrict__ parents, const int64_t* __restrict__ tokens,
                             const float* __restrict__ p, const float* __restrict__ q,
                             const float* __restrict__ uniforms, const float* __restrict__ noise,
                             int64_t* __restrict__ decision, int64_t* __restrict__ extra, int n, int64_t vocab) {
  __shared__ int rep[kMaxNodes], depth[kMaxNodes], candidates[kMaxNodes];
  __shared__ int count, chosen;
  GroupNodes(parents, tokens, n, rep, depth);
  const int u = blockIdx.x;
  if (rep[u] != u) return;
  if (threadIdx.x == 0) {
    count = 0;
    for (int c = u + 1; c < n; ++c)
      if (rep[parents[c]] == u) candidates[count++] = c;
  }
  __syncthreads();
  const int k = count;
  const float* pu = p + u * vocab;
  const float* qs = q + (k > 0 ? candidates[0] : 0) * vocab;
  const float rho = KSeqRho(pu, qs, k, vocab);
  if (threadIdx.x == 0) {
    chosen = -1;
    for (int i = 0; i < k && chosen < 0; ++i) {
      const int c = candidates[i];
      const float px = pu[tokens[c]], qx = qs[tokens[c]];
      if (qx > 0.0f && px > 0.0f && __fmul_rn(uniforms[c], __fmul_rn(rho, qx)) < px) chosen = c;
    }
    decision[u] = chosen;
  }
  __syncthreads();
  if (chosen >= 0) return;
  // Stopping here: the K-SEQ residual p - min(q, p/ρ) (1 - (1-β)^k)/β, or p
  // at a leaf, where β is 0, or where rounding left the residual no mass.
  const float inv = 1.0f / rho;
  float beta = 0.0f;
  if (k > 0) {
    for (int64_t x = threadIdx.x; x < vocab; x += kBlock) beta += fminf(qs[x], __fmul_rn(pu[x], inv));
    beta = BlockSumAll<kBlock>(beta);
  }
  const float scale = beta > 0.0f ? static_cast<float>((1.0 - pow(1.0 - static_cast<double>(beta), k)) / beta) : 0.0f;
  float mass = 0.0f;
  uint64_t on_residual = 0, on_target = 0;
  for (int64_t x = threadIdx.x; x < vocab; x += kBlock) {
    const float px = pu[x], e = fmaxf(noise[x], FLT_MIN);
    const float r = fmaxf(__fsub_rn(px, __fmul_rn(fminf(qs[x], __fmul_rn(px, inv)), scale)), 0.0f);
    mass += r;
    on_residual = MaxKey(on_residual, ArgmaxKey(r / e, static_cast<uint32_t>(x)));
    on_target = MaxKey(on_target, ArgmaxKey(px / e, static_cast<uint32_t>(x)));
  }
  mass = BlockSumAll<kBlock>(mass);
  on_residual = BlockMaxKey<kBlock>(on_residual);
  on_target = BlockMaxKey<kBlock>(on_target);
  if (threadIdx.x == 0) extra[u] = TokenOfKey(beta > 0.0f && mass > 0.0f ? on_residual : on_target);
}

// One block: groups the nodes, then thread 0 follows the decisions from the
// root and writes the accepted node's path and its group's token.
__global__ void WalkGroups(const int64_t* __restrict__ parents, const int64_t* __restrict__ tokens,
                           const int64_t* __restrict__ decision, const int64_t* __restrict__ extra,
                           int64_t* __restrict__ out, int n) {
  __shared__ int rep[kMaxNodes], depth[kMaxNodes];
  GroupNodes(parents, tokens, n, rep, depth);
  if (threadIdx.x != 0) return;
  int node = 0;
  while (decision[rep[node]] >= 0) node = static_cast<int>(decision[rep[node]]);
  const int accepted = depth[node];
  for (int i = accepted + 1; i < n; ++i) out[i] = 0;
  for (int i = accepted, w = node; i >= 1; --i, w = static_cast<int>(parents[w])) out[i] = w;
  out[0] = accepted;
  out[n] = extra[rep[node]];
}

}  // namespace

int LaunchKSeqTree(const int64_t* parents, const int64_t* tokens, const float* p, const float* q,
                   const float* uniforms, const float* noise, int64_t* decision, int64_t* extra, int64_t* out,
                   int64_t n, int64_t vocab, void* stream) {
  if (n < 1 || n > kMaxNodes || vocab < 1 || vocab >= (int64_t{1} << 32)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  DecideGroups<<<static_cast<unsigned>(n), kBlock, 0, s>>>(parents, tokens, p, q, uniforms, noise, decision, extra,
                                                             static_cast<int>(n), vocab);
  WalkGroups<<<1, kMaxNodes, 0, s>>>(parents, tokens, decision, extra, out, static_cast<int>(n));
  return cudaGetLastError();
}

}  // namespace k_seq_kernels
}  // namespace speclab
