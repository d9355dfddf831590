// See level_children.h.
#include "algorithms/tree_builders/common/cuda/level_children.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace speclab {
namespace level_children_kernels {
namespace {

constexpr int kThreads = 256;

// Block j: child j's token and its q row (float4 where `vectors`); block 0
// also the next level's fed tokens, read from the ranks themselves (no block
// waits for another's writes).
__global__ void __launch_bounds__(kThreads)
    LevelChildren(const int64_t* __restrict__ by_rank, const int64_t* __restrict__ flat,
                  int64_t* __restrict__ children, const float* __restrict__ q,
                  const int64_t* __restrict__ parent_rows, float* __restrict__ q_rows, int64_t vocab, bool vectors,
                  const int64_t* __restrict__ feed, int64_t* __restrict__ fed, int width) {
  const int64_t j = blockIdx.x;
  if (threadIdx.x == 0) children[j] = by_rank[flat[j]];
  if (j == 0) {
    for (int w = threadIdx.x; w < width; w += kThreads) fed[w] = feed == nullptr ? 0 : by_rank[flat[feed[w]]];
  }
  if (q == nullptr) return;
  const int64_t row = parent_rows[j];
  if (vectors) {
    const float4* src = reinterpret_cast<const float4*>(q + row * vocab);
    float4* dst = reinterpret_cast<float4*>(q_rows + j * vocab);
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < vocab / 4; v += kThreads) dst[v] = src[v];
  } else {
    const float* src = q + row * vocab;
    float* dst = q_rows + j * vocab;
#pragma unroll 4
    for (int64_t v = threadIdx.x; v < vocab; v += kThreads) dst[v] = src[v];
  }
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

int LaunchLevelChildren(const int64_t* by_rank, const int64_t* flat, int64_t* children, int64_t count,
                        const float* q, const int64_t* parent_rows, float* q_rows, int64_t vocab,
                        const int64_t* feed, int64_t* fed, int64_t width, void* stream) {
  if (count < 1 || count > 65535 || width < 0 || width > 1024 || (q != nullptr && (vocab < 1 || q_rows == nullptr)))
    return cudaErrorInvalidValue;
  const bool vectors = q != nullptr && vocab % 4 == 0 && Aligned(q) && Aligned(q_rows);
  LevelChildren<<<static_cast<unsigned>(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      by_rank, flat, children, q, parent_rows, q_rows, vocab, vectors, feed, fed, static_cast<int>(width));
  return cudaGetLastError();
}

}  // namespace level_children_kernels
}  // namespace speclab
