// See opt_tree_kernels.h. Every ranking is by (score descending, index
// ascending), each thread counting the entries above its own (O(n), n <=
// 1024), so ties go to the earlier entry as the ATen sorts' stable order
// does; E_d is summed by one thread, heaviest first, as the host sums it.
#include "algorithms/tree_builders/opt_tree/cuda/opt_tree_kernels.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "algorithms/tree_builders/common/cuda/block_ranks.cuh"
#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace opt_tree_kernels {
namespace {

using block_ranks::Above;
using block_ranks::Before;
using block_ranks::WriteKeptTree;
using row_reduce::OrderKey;

constexpr int kThreads = static_cast<int>(kMaxItems);
constexpr int kMaxNodes = 32;  // N * N children fit the block

__global__ void __launch_bounds__(kThreads)
    GrowLevel(const int64_t* __restrict__ top_tokens, const float* __restrict__ top_logq, int rows, Pool pool,
              LevelRule rule, int64_t* __restrict__ feed_tokens, int64_t* __restrict__ feed_rows,
              int64_t* __restrict__ kept_tokens, int64_t* __restrict__ kept_parents) {
  __shared__ uint64_t keys[kThreads];
  __shared__ unsigned char flags[kThreads];
  __shared__ int node_of[kThreads];
  __shared__ double heaviest[kMaxNodes];
  __shared__ int64_t kept_now;
  const int i = threadIdx.x, n = rule.nodes, children = rows * n, level = rule.level;
  const bool last = level + 1 == rule.depth;
  const bool was_going = *pool.go;

  // The level's N best children (ties: the earlier) join the pool at level * N, in child order.
  double score = -INFINITY;
  if (i < children) {
    const int row = i / n;
    const double base = level == 0 ? 0.0 : pool.scores[(level - 1) * n + row];
    score = base + static_cast<double>(top_logq[i]);
    keys[i] = OrderKey(score);
  }
  __syncthreads();
  const bool chosen = i < children && Above(keys, children, i) < n;
  if (i < children) flags[i] = chosen;
  __syncthreads();
  if (chosen) {
    const int slot = Before(flags, i), row = i / n, at = level * n + slot;
    pool.tokens[at] = top_tokens[i];
    pool.parents[at] = level == 0 ? -1 : (level - 1) * n + row;
    pool.scores[at] = score;
    if (!last) {
      feed_tokens[slot] = top_tokens[i];
      feed_rows[slot] = row;
    }
  }
  __syncthreads();  // the appended entries are visible to the block

  // The rule, where growth went on: E_d, the weight of the N heaviest entries of levels 1..d.
  const int size = (level + 1) * n;
  if (i < size) keys[i] = OrderKey(pool.scores[i]);
  __syncthreads();
  if (i < size) {
    const int rank = Above(keys, size, i);
    if (rank < n) heaviest[rank] = exp(pool.scores[i]);
  }
  __syncthreads();
  if (i == 0) {
    kept_now = *pool.kept;
    if (was_going) {
      double weight = 0;
      for (int r = 0; r < n; ++r) weight += heaviest[r];
      *pool.go = !last && weight - *pool.previous > rule.threshold;
      *pool.previous = weight;
      *pool.kept = size;
      kept_now = size;
    }
  }
  __syncthreads();

  // The draft so far: the N heaviest entries of the levels up to the stop, in pool order.
  const int kept = static_cast<int>(kept_now);
  if (i < kept) keys[i] = OrderKey(pool.scores[i]);
  __syncthreads();
  const bool in_tree = i < kept && Above(keys, kept, i) < n;
  if (i < kept) flags[i] = in_tree;
  __syncthreads();
  WriteKeptTree(i, in_tree, flags, node_of, pool.tokens, pool.parents, kept_tokens, kept_parents);
}

}  // namespace

int LaunchGrowLevel(const int64_t* top_tokens, const float* top_logq, int rows, Pool pool, LevelRule rule,
                    int64_t* feed_tokens, int64_t* feed_rows, int64_t* kept_tokens, int64_t* kept_parents,
                    void* stream) {
  const int n = rule.nodes;
  if (n < 1 || n > kMaxNodes || rule.depth < 1 || rule.depth * n > kMaxItems || rule.level < 0 ||
      rule.level >= rule.depth || rows != (rule.level == 0 ? 1 : n))
    return cudaErrorInvalidValue;
  GrowLevel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(top_tokens, top_logq, rows, pool, rule,
                                                                  feed_tokens, feed_rows, kept_tokens, kept_parents);
  return cudaGetLastError();
}

}  // namespace opt_tree_kernels
}  // namespace speclab
