// See recursive_rejection.h.
#include "algorithms/verifiers/common/cuda/recursive_rejection.h"

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace recursive_rejection_kernels {
namespace {

using namespace row_reduce;  // NOLINT: the row kernels' shared reductions

// One block a node's (or the walk's) passes over the vocabulary: a wide
// block, since a few blocks carry the whole step.
constexpr int kBlock = 1024;

// decision[node]: the accepted child, or where the stopping law lies.
constexpr int64_t kStopOnResidual = -1;  // the node's residual row
constexpr int64_t kStopOnTarget = -2;    // p itself: a leaf, or no update made

// True where `token` is one of the first `count` of `tokens`.
__device__ __forceinline__ bool Among(const int64_t* tokens, int count, int64_t token) {
  for (int i = 0; i < count; ++i)
    if (tokens[i] == token) return true;
  return false;
}

// Vocabularies of at most kBlock * kCachedPerThread entries keep a node's
// running residual in registers (each thread its entries v = threadIdx.x +
// j * kBlock): a child's rejection is then one pass of q loads instead of
// two passes over the residual, and the residual row is written once, at
// the end. The arithmetic, and the order of every sum, are those of the
// uncached passes.
constexpr int kCachedPerThread = 8;

// The value at entry x of a row held in registers as `cached`, in every
// thread: its owner puts it in shared memory (synchronises).
__device__ __forceinline__ float CachedAt(const float (&cached)[kCachedPerThread], int64_t x) {
  __shared__ float at;
  __syncthreads();  // an earlier call's readers are done
  if (threadIdx.x == x % kBlock) {
    const int64_t slot = x / kBlock;
#pragma unroll
    for (int j = 0; j < kCachedPerThread; ++j)
      if (j == slot) at = cached[j];
  }
  __syncthreads();
  return at;
}

// One block a node: its children in index order against the running
// residual p~ = scale * src, written to its residual row on each reject
// (kCached: held in registers, written once if it was updated).
template <bool kCached>
__global__ void __launch_bounds__(kBlock)
    DecideNodes(const int64_t* __restrict__ parents, const int64_t* __restrict__ tokens, const float* __restrict__ p,
                const float* __restrict__ q, const float* __restrict__ uniforms, QRows rows,
                float* __restrict__ residual, int64_t* __restrict__ decision, int n, int64_t vocab) {
  const bool masked = rows == kFirstSiblingRowMasked;
  __shared__ int64_t earlier[kMaxTreeItems];  // masked: the distinct tokens tried so far
  const int node = blockIdx.x;
  float* r = residual + node * vocab;
  const float* src = p + node * vocab;
  float cached[kCached ? kCachedPerThread : 1];  // kCached: src's entries
  if constexpr (kCached) {
#pragma unroll
    for (int j = 0; j < kCachedPerThread; ++j) {
      const int64_t v = threadIdx.x + j * kBlock;
      cached[j] = v < vocab ? src[v] : 0.0f;
    }
  }
  float scale = 1.0f;
  bool updated = false;
  int tried = 0;
  unsigned tried_slots = 0;  // kCached, masked: bit j where this thread's entry j is among `earlier`
  float tried_mass = 0.0f;          // masked: the shared q's mass on them
  const float* shared_q = nullptr;  // the first child's row
  for (int c = node + 1; c < n; ++c) {
    if (parents[c] != node) continue;
    const float* qc = rows != kOwnRow && shared_q != nullptr ? shared_q : q + c * vocab;
    shared_q = qc;
    const int64_t x = tokens[c];
    // q_j = q with the earlier tokens removed, renormalised (all zero where nothing is left).
    const float keep = 1.0f - tried_mass;
    const float inv_norm = !masked ? 1.0f : keep > 0.0f ? 1.0f / keep : 0.0f;
    const float qx = masked && Among(earlier, tried, x) ? 0.0f : __fmul_rn(qc[x], inv_norm);
    float px;
    if constexpr (kCached) {
      px = __fmul_rn(CachedAt(cached, x), scale);
    } else {
      px = __fmul_rn(src[x], scale);
    }
    if (qx > 0.0f && px > 0.0f && __fmul_rn(uniforms[c], qx) < px) {
      if (threadIdx.x == 0) decision[node] = c;
      return;
    }
    if (inv_norm > 0.0f) {  // a zero q_j leaves p~ as it is
      float mass = 0.0f;
      if constexpr (kCached) {
        float next[kCachedPerThread];
#pragma unroll
        for (int j = 0; j < kCachedPerThread; ++j) {
          const int64_t v = threadIdx.x + j * kBlock;
          const float qv = v >= vocab || ((tried_slots >> j) & 1u) ? 0.0f : __fmul_rn(qc[v], inv_norm);
          next[j] = fmaxf(__fmul_rn(cached[j], scale) - qv, 0.0f);
          if (v < vocab) mass += next[j];
        }
        mass = BlockSumAll<kBlock>(mass);
        if (mass > 0.0f) {  // no mass left (p~ = q_j up to rounding): keep p~, as the host rule does
#pragma unroll
          for (int j = 0; j < kCachedPerThread; ++j) cached[j] = next[j];
          scale = 1.0f / mass;
          updated = true;
        }
      } else {
        for (int64_t v = threadIdx.x; v < vocab; v += kBlock) {
          const float qv = masked && Among(earlier, tried, v) ? 0.0f : __fmul_rn(qc[v], inv_norm);
          mass += fmaxf(__fmul_rn(src[v], scale) - qv, 0.0f);
        }
        mass = BlockSumAll<kBlock>(mass);
        if (mass > 0.0f) {  // as above
          for (int64_t v = threadIdx.x; v < vocab; v += kBlock) {
            const float qv = masked && Among(earlier, tried, v) ? 0.0f : __fmul_rn(qc[v], inv_norm);
            r[v] = fmaxf(__fmul_rn(src[v], scale) - qv, 0.0f);
          }
          __syncthreads();  // the next child reads r[x] from any thread's slice
          src = r;
          scale = 1.0f / mass;
          updated = true;
        }
      }
    }
    if (masked && !Among(earlier, tried, x)) {
      tried_mass += qc[x];
      __syncthreads();  // everyone has read `earlier` before it grows
      if (threadIdx.x == 0) earlier[tried] = x;
      if (kCached && threadIdx.x == x % kBlock) tried_slots |= 1u << (x / kBlock);
      ++tried;
      __syncthreads();
    }
  }
  if constexpr (kCached) {
    if (updated) {
#pragma unroll
      for (int j = 0; j < kCachedPerThread; ++j) {
        const int64_t v = threadIdx.x + j * kBlock;
        if (v < vocab) r[v] = cached[j];
      }
    }
  }
  if (threadIdx.x == 0) decision[node] = updated ? kStopOnResidual : kStopOnTarget;
}

// One block: thread 0 follows the decisions from the root; then the block
// races the stopping node's law (the race is blind to its scale).
__global__ void WalkAndDraw(const float* __restrict__ p, const float* __restrict__ residual,
                            const float* __restrict__ noise, const int64_t* __restrict__ decision,
                            int64_t* __restrict__ out, int n, int64_t vocab) {
  __shared__ int stop;
  if (threadIdx.x == 0) {
    int node = 0, accepted = 0;
    for (int i = 1; i < n; ++i) out[i] = 0;
    while (decision[node] >= 0) {
      node = static_cast<int>(decision[node]);
      out[++accepted] = node;
    }
    out[0] = accepted;
    stop = node;
  }
  __syncthreads();
  const float* law = (decision[stop] == kStopOnResidual ? residual : p) + stop * vocab;
  uint64_t key = 0;
#pragma unroll 8
  for (int64_t v = threadIdx.x; v < vocab; v += kBlock)
    key = MaxKey(key, ArgmaxKey(law[v] / fmaxf(noise[v], FLT_MIN), static_cast<uint32_t>(v)));
  key = BlockMaxKey<kBlock>(key);
  if (threadIdx.x == 0) out[n] = static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

}  // namespace

int LaunchRecursiveRejection(const int64_t* parents, const int64_t* tokens, const float* p, const float* q,
                             const float* uniforms, const float* noise, QRows rows, float* residual,
                             int64_t* decision, int64_t* out, int64_t n, int64_t vocab, void* stream) {
  if (n < 1 || n > kMaxTreeItems || vocab < 1 || vocab >= (int64_t{1} << 32)) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(stream);
  if (vocab <= kBlock * kCachedPerThread) {
    DecideNodes<true><<<static_cast<unsigned>(n), kBlock, 0, s>>>(parents, tokens, p, q, uniforms, rows, residual,
                                                                  decision, static_cast<int>(n), vocab);
  } else {
    DecideNodes<false><<<static_cast<unsigned>(n), kBlock, 0, s>>>(parents, tokens, p, q, uniforms, rows, residual,
                                                                   decision, static_cast<int>(n), vocab);
  }
  WalkAndDraw<<<1, kBlock, 0, s>>>(p, residual, noise, decision, out, static_cast<int>(n), vocab);
  return cudaGetLastError();
}

}  // namespace recursive_rejection_kernels
}  // namespace speclab
