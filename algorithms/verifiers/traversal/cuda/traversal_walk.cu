// See traversal_walk.h. The rule's scalar bookkeeping (which leaf is next,
// the weights α, the tried tokens) runs in one thread on shared memory; the
// block's threads share each residual's pass over the vocabulary.
#include "algorithms/verifiers/traversal/cuda/traversal_walk.h"

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace traversal_kernels {
namespace {

using namespace row_reduce;  // NOLINT: the row kernels' shared reductions

// One block a node's (or the walk's) passes over the vocabulary: a wide
// block, since a few blocks carry the whole step.
constexpr int kBlock = 1024;

// The walk's state, one entry a node.
struct State {
  int parent[kMaxNodes];
  int first_child[kMaxNodes];   // -1 for a leaf of the drafted tree
  int next_sibling[kMaxNodes];  // -1 for the last
  int64_t token[kMaxNodes];
  bool alive[kMaxNodes];
  bool in_subtree[kMaxNodes];
  bool own_row[kMaxNodes];     // P_u is in u's residual row (else p's row)
  float alpha[kMaxNodes];
  float scale[kMaxNodes];      // P_u = scale * that row
  float at_parent[kMaxNodes];  // P_parent(c)(x_c), kept current
  float q_at[kMaxNodes];       // the shared q of parent(c) at x_c
  float tried_mass[kMaxNodes];  // masked: that q's mass on u's tried tokens
  int64_t tried[kMaxNodes];     // the tokens tried at the node being rejected at
  int depth[kMaxNodes];
  float uniform[kMaxNodes];     // test t's uniform
  int max_depth;
  int tried_count;
  int leaf;
  bool accept;
};

__device__ float AcceptProbability(float numerator, float denominator) {
  if (denominator <= 0.0f || numerator <= 0.0f) return 0.0f;
  return numerator >= denominator ? 1.0f : numerator / denominator;
}

// Whether a rejected child of u carries `token`.
__device__ bool TriedAt(const State& s, int u, int64_t token) {
  for (int c = s.first_child[u]; c >= 0; c = s.next_sibling[c])
    if (!s.alive[c] && s.token[c] == token) return true;
  return false;
}

// 1 / (1 - tried mass) where siblings were drawn without replacement (0 when
// nothing is left), else 1.
__device__ float MaskScale(const State& s, int u, bool masked) {
  if (!masked) return 1.0f;
  const float keep = 1.0f - s.tried_mass[u];
  return keep > 0.0f ? 1.0f / keep : 0.0f;
}

// Q~_u(x_c): the law u's next child is tested against, at child c's token.
__device__ float TestedQ(const State& s, int u, int c, bool masked) {
  if (masked && TriedAt(s, u, s.token[c])) return 0.0f;
  return __fmul_rn(s.q_at[c], MaskScale(s, u, masked));
}

// α over u's remaining subtree, by one warp: a depth at a time (a node's α
// reads its parent's), the nodes of a depth spread over the lanes. Each α is
// the sequential walk's, from the same operands.
__device__ void RecomputeSubtree(State& s, int u, bool masked, int n) {
  const int lane = threadIdx.x % kWarpSize;
  for (int c = u + 1 + lane; c < n; c += kWarpSize) s.in_subtree[c] = false;
  if (lane == 0) s.in_subtree[u] = true;
  __syncwarp();
  for (int d = s.depth[u] + 1; d <= s.max_depth; ++d) {
    for (int c = u + 1 + lane; c < n; c += kWarpSize) {
      if (s.depth[c] != d) continue;
      const int up = s.parent[c];
      s.in_subtree[c] = s.alive[c] && up >= u && s.in_subtree[up];
      if (s.in_subtree[c])
        s.alpha[c] = AcceptProbability(__fmul_rn(s.alpha[up], s.at_parent[c]), TestedQ(s, up, c, masked));
    }
    __syncwarp();
  }
}

// The first leaf in DFS order: descend through first remaining children.
__device__ int FirstLeaf(const State& s) {
  int v = 0;
  for (bool descended = true; descended;) {
    descended = false;
    for (int c = s.first_child[v]; c >= 0 && !descended; c = s.next_sibling[c]) {
      if (s.alive[c]) {
        v = c;
        descended = true;
      }
    }
  }
  return v;
}

__device__ __forceinline__ bool Among(const int64_t* tokens, int count, int64_t token) {
  for (int i = 0; i < count; ++i)
    if (tokens[i] == token) return true;
  return false;
}

// Vocabularies of at most kBlock * kCachedPerThread entries keep a
// rejection's new residual in registers between its sum and its write (one
// pass of loads, not two), and the owners of the surviving siblings' tokens
// put their new P_u(x_c) in shared memory from there: no thread reads back
// the row just written. The arithmetic is the uncached passes'.
constexpr int kCachedPerThread = 8;

template <bool kCached>
__global__ void __launch_bounds__(kBlock)
    TraversalWalk(const int64_t* __restrict__ parents, const int64_t* __restrict__ tokens,
                  const float* __restrict__ p, const float* __restrict__ q, bool masked,
                  const float* __restrict__ uniforms, const float* __restrict__ noise,
                  float* __restrict__ residual, int64_t* __restrict__ out, int n, int64_t vocab) {
  __shared__ State s;
  for (int c = threadIdx.x; c < n; c += kBlock) {
    s.parent[c] = c == 0 ? -1 : static_cast<int>(parents[c]);
    s.token[c] = tokens[c];
    s.alive[c] = true;
    s.own_row[c] = false;
    s.alpha[c] = 1.0f;
    s.scale[c] = 1.0f;
    s.tried_mass[c] = 0.0f;
    s.first_child[c] = -1;
    s.next_sibling[c] = -1;
    s.uniform[c] = uniforms[c];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int c = n - 1; c >= 1; --c) {  // backwards: each list in index order
      s.next_sibling[c] = s.first_child[s.parent[c]];
      s.first_child[s.parent[c]] = c;
    }
    s.depth[0] = 0;
    s.max_depth = 0;
    for (int c = 1; c < n; ++c) {
      s.depth[c] = s.depth[s.parent[c]] + 1;
      s.max_depth = max(s.max_depth, s.depth[c]);
    }
  }
  __syncthreads();
  for (int c = 1 + threadIdx.x; c < n; c += kBlock) {
    const int u = s.parent[c];
    s.q_at[c] = q[s.first_child[u] * vocab + s.token[c]];  // siblings share their first's row
    s.at_parent[c] = p[u * vocab + s.token[c]];
  }
  __syncthreads();
  if (threadIdx.x < kWarpSize) RecomputeSubtree(s, 0, masked, n);
  __syncthreads();
  for (int test = 0;; ++test) {
    if (threadIdx.x == 0) {
      s.leaf = FirstLeaf(s);
      s.accept = s.leaf == 0 || s.uniform[test] < s.alpha[s.leaf];
      if (!s.accept) {  // the tokens tried at its parent, for the residual's masked q
        const int u = s.parent[s.leaf];
        s.tried_count = 0;
        for (int c = s.first_child[u]; c >= 0 && masked; c = s.next_sibling[c])
          if (!s.alive[c]) s.tried[s.tried_count++] = s.token[c];
      }
    }
    __syncthreads();
    if (s.accept) break;
    // Reject the leaf v at u: r = (α_u P_u - Q~_u)+ with Q~_u as used for v.
    const int v = s.leaf, u = s.parent[v];
    const float* src = (s.own_row[u] ? residual : p) + u * vocab;
    const float* shared_q = q + s.first_child[u] * vocab;
    const float weight = __fmul_rn(s.alpha[u], s.scale[u]), mask_scale = MaskScale(s, u, masked);
    float mass = 0.0f;
    float* r = residual + u * vocab;
    if constexpr (kCached) {
      float next[kCachedPerThread];
#pragma unroll
      for (int j = 0; j < kCachedPerThread; ++j) {
        const int64_t x = threadIdx.x + j * kBlock;
        const bool in = x < vocab;
        const float qx = !in || Among(s.tried, s.tried_count, x) ? 0.0f : __fmul_rn(shared_q[x], mask_scale);
        next[j] = fmaxf(__fmul_rn(weight, in ? src[x] : 0.0f) - qx, 0.0f);
        if (in) mass += next[j];
      }
      mass = BlockSumAll<kBlock>(mass);
      if (mass > 0.0f) {  // no mass: P_u stays as it was (probability-zero branches only)
        const float scale = 1.0f / mass;
#pragma unroll
        for (int j = 0; j < kCachedPerThread; ++j)
          if (threadIdx.x + j * kBlock < vocab) r[threadIdx.x + j * kBlock] = next[j];
        // P_u(x_c) of the surviving siblings, from their tokens' owners (as
        // the uncached form reads it back: the new row times its scale).
        for (int c = s.first_child[u]; c >= 0; c = s.next_sibling[c]) {
          if (c == v || !s.alive[c] || s.token[c] % kBlock != threadIdx.x) continue;
          const int64_t slot = s.token[c] / kBlock;
#pragma unroll
          for (int j = 0; j < kCachedPerThread; ++j)
            if (j == slot) s.at_parent[c] = __fmul_rn(next[j], scale);
        }
      }
    } else {
      for (int64_t x = threadIdx.x; x < vocab; x += kBlock) {
        const float qx = Among(s.tried, s.tried_count, x) ? 0.0f : __fmul_rn(shared_q[x], mask_scale);
        mass += fmaxf(__fmul_rn(weight, src[x]) - qx, 0.0f);
      }
      mass = BlockSumAll<kBlock>(mass);
      if (mass > 0.0f) {  // no mass: P_u stays as it was (probability-zero branches only)
        for (int64_t x = threadIdx.x; x < vocab; x += kBlock) {
          const float qx = Among(s.tried, s.tried_count, x) ? 0.0f : __fmul_rn(shared_q[x], mask_scale);
          r[x] = fmaxf(__fmul_rn(weight, src[x]) - qx, 0.0f);
        }
      }
    }
    __syncthreads();
    if (threadIdx.x < kWarpSize) {
      if (threadIdx.x == 0) {
        const float denominator = mass + 1.0f - s.alpha[u];
        s.alpha[u] = denominator > 0.0f ? mass / denominator : 1.0f;
        if (mass > 0.0f) {
          s.own_row[u] = true;
          s.scale[u] = 1.0f / mass;
        }
        if (masked && !TriedAt(s, u, s.token[v])) s.tried_mass[u] += s.q_at[v];
        s.alive[v] = false;
        // Uncached, the surviving siblings' P_u(x_c) from the row (unchanged
        // where no mass was left, as it then is).
        if (!kCached && mass > 0.0f) {
          for (int c = s.first_child[u]; c >= 0; c = s.next_sibling[c])
            if (s.alive[c]) s.at_parent[c] = __fmul_rn(r[s.token[c]], s.scale[u]);
        }
      }
      __syncwarp();
      RecomputeSubtree(s, u, masked, n);
    }
    __syncthreads();
  }
  // Accept root -> leaf and race P_leaf for the extra token.
  const int v = s.leaf;
  const float* law = (s.own_row[v] ? residual : p) + v * vocab;
  uint64_t key = 0;
#pragma unroll 8
  for (int64_t x = threadIdx.x; x < vocab; x += kBlock)
    key = MaxKey(key, ArgmaxKey(law[x] / fmaxf(noise[x], FLT_MIN), static_cast<uint32_t>(x)));
  key = BlockMaxKey<kBlock>(key);
  if (threadIdx.x == 0) {
    int depth = 0;
    for (int w = v; w != 0; w = s.parent[w]) ++depth;
    for (int i = 1; i < n; ++i) out[i] = 0;
    for (int w = v, i = depth; w != 0; w = s.parent[w], --i) out[i] = w;
    out[0] = depth;
    out[n] = static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
  }
}

}  // namespace

int LaunchTraversalWalk(const int64_t* parents, const int64_t* tokens, const float* p, const float* q, bool masked,
                        const float* uniforms, const float* noise, float* residual, int64_t* out, int64_t n,
                        int64_t vocab, void* stream) {
  if (n < 1 || n > kMaxNodes || vocab < 1 || vocab >= (int64_t{1} << 32)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  if (vocab <= kBlock * kCachedPerThread) {
    TraversalWalk<true><<<1, kBlock, 0, s>>>(parents, tokens, p, q, masked, uniforms, noise, residual, out,
                                             static_cast<int>(n), vocab);
  } else {
    TraversalWalk<false><<<1, kBlock, 0, s>>>(parents, tokens, p, q, masked, uniforms, noise, residual, out,
                                              static_cast<int>(n), vocab);
  }
  return cudaGetLastError();
}

}  // namespace traversal_kernels
}  // namespace speclab
