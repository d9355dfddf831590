// See frontier_kernels.h.
#include "algorithms/tree_builders/common/cuda/frontier_kernels.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace frontier_kernels {
namespace {

using row_reduce::OrderKey;

constexpr int kThreads = static_cast<int>(kMaxTreeItems);

// Entry i's place among the `count` largest of keys[0..n) kept in index
// order (among equal keys the smaller index ranks higher), or -1 where i is
// not kept: thread i ranks entry i against all others (O(n) each, n <=
// 1024), then counts the kept entries before it. Every thread of the block
// calls it (it synchronises); `kept` is shared scratch of n entries.
__device__ int SlotAmongBest(const uint64_t* keys, unsigned char* kept, int i, int n, int count) {
  bool keep = false;
  if (i < n) {
    int above = 0;
    for (int j = 0; j < n; ++j) above += keys[j] > keys[i] || (keys[j] == keys[i] && j < i);
    keep = above < count;
    kept[i] = keep;
  }
  __syncthreads();
  if (!keep) return -1;
  int before = 0;
  for (int j = 0; j < i; ++j) before += kept[j];
  return before;
}

__global__ void __launch_bounds__(kThreads) BestInOrder(const double* __restrict__ scores, int64_t* __restrict__ out,
                                                       int n, int count) {
  __shared__ uint64_t keys[kThreads];
  __shared__ unsigned char kept[kThreads];
  const int i = threadIdx.x;
  if (i < n) keys[i] = OrderKey(scores[i]);
  __syncthreads();
  const int slot = SlotAmongBest(keys, kept, i, n, count);
  if (slot >= 0) out[slot] = i;
}

// Thread c = i * k + j scores child (i, j), writes it to the pool, ranks it
// against the level's other k * k children and, if among the k best, takes
// its place in the next frontier (by the kept children before it).
__global__ void __launch_bounds__(kThreads)
    ExpandFrontier(const float* __restrict__ top_scores, const int64_t* __restrict__ top_tokens,
                   const double* __restrict__ frontier_scores, const int64_t* __restrict__ frontier_pool,
                   int64_t* __restrict__ pool_tokens, int64_t* __restrict__ pool_parents,
                   double* __restrict__ pool_scores, int64_t offset, int64_t* __restrict__ next_tokens,
                   int64_t* __restrict__ next_rows, double* __restrict__ next_scores,
                   int64_t* __restrict__ next_pool, int k) {
  __shared__ uint64_t keys[kThreads];
  __shared__ unsigned char kept[kThreads];
  const int c = threadIdx.x, n = k * k;
  double score = 0;
  if (c < n) {
    const int i = c / k;
    score = frontier_scores[i] + static_cast<double>(top_scores[c]);
    pool_tokens[offset + c] = top_tokens[c];
    pool_parents[offset + c] = frontier_pool[i];
    pool_scores[offset + c] = score;
    keys[c] = OrderKey(score);
  }
  __syncthreads();
  const int slot = SlotAmongBest(keys, kept, c, n, k);
  if (slot >= 0) {
    next_tokens[slot] = top_tokens[c];
    next_rows[slot] = c / k;
    next_scores[slot] = score;
    next_pool[slot] = offset + c;
  }
}

}  // namespace

int LaunchBestInOrder(const double* scores, int64_t* out, int64_t n, int64_t count, void* stream) {
  if (n < 1 || n > kMaxTreeItems || count < 1 || count > n) return cudaErrorInvalidValue;
  BestInOrder<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(scores, out, static_cast<int>(n),
                                                                     static_cast<int>(count));
  return cudaGetLastError();
}

int LaunchExpandFrontier(const float* top_scores, const int64_t* top_tokens, const double* frontier_scores,
                         const int64_t* frontier_pool, int64_t* pool_tokens, int64_t* pool_parents,
                         double* pool_scores, int64_t offset, int64_t* next_tokens, int64_t* next_rows,
                         double* next_scores, int64_t* next_pool, int k, void* stream) {
  if (k < 1 || k > 32 || offset < 0) return cudaErrorInvalidValue;
  ExpandFrontier<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      top_scores, top_tokens, frontier_scores, frontier_pool, pool_tokens, pool_parents, pool_scores, offset,
      next_tokens, next_rows, next_scores, next_pool, k);
  return cudaGetLastError();
}

}  // namespace frontier_kernels
}  // namespace speclab
