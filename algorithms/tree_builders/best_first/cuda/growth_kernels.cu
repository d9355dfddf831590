// See growth_kernels.h. Thread i holds union entry i: pool entry i for i < P,
// child i - P after. Every ranking is by (score descending, index
// ascending), each thread counting the entries above its own (O(n), n <=
// 1024), so ties go to the earlier entry as the ATen sorts' stable order does.
#include "algorithms/tree_builders/best_first/cuda/growth_kernels.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "algorithms/tree_builders/common/cuda/block_ranks.cuh"
#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace growth_kernels {
namespace {

using block_ranks::Above;
using block_ranks::Before;
using block_ranks::WriteKeptTree;
using row_reduce::OrderKey;

constexpr int kThreads = static_cast<int>(kMaxItems);

__global__ void __launch_bounds__(kThreads)
    GrowLevel(const int64_t* __restrict__ top_tokens, const float* __restrict__ top_logq, int rows, int width,
              Pool pool, LevelRule rule, int64_t* __restrict__ feed_tokens, int64_t* __restrict__ feed_parents,
              int64_t* __restrict__ feed_depths, int64_t* __restrict__ kept_tokens,
              int64_t* __restrict__ kept_parents) {
  __shared__ uint64_t keys[kThreads];
  __shared__ unsigned char flags[kThreads];
  __shared__ int node_of[kThreads];
  __shared__ unsigned long long best_new;
  __shared__ unsigned long long kth_best;
  const int i = threadIdx.x, p = pool.pool, children = rows * width, n = p + children, b = rule.budget;
  const uint64_t none = OrderKey(-INFINITY);
  const int grown = static_cast<int>(*pool.count);
  const bool was_stopped = *pool.stopped;
  if (i == 0) {
    best_new = 0;
    kth_best = 0;
  }

  // The union's keys: the grown pool, then the children that pass.
  int64_t parent = -1;
  double score = -INFINITY;
  bool passes = false;
  if (i < p) {
    keys[i] = i < grown ? OrderKey(pool.scores[i]) : none;
  } else if (i < n) {
    const int child = i - p, row = child / width;
    parent = rule.root ? -1 : pool.beams[row];
    const bool real = rule.root || parent >= 0;
    const double base = rule.root ? 0.0 : (real ? pool.scores[parent] : -INFINITY);
    score = base + rule.log_decay + static_cast<double>(top_logq[child]);
    passes = (real && score >= rule.min_log_prob) || (rule.root && child == 0);  // the root's best child always
    passes = passes && !was_stopped;
    keys[i] = passes ? OrderKey(score) : none;
  }
  __syncthreads();
  if (passes) atomicMax(&best_new, static_cast<unsigned long long>(keys[i]));
  if (i < grown && grown >= b && Above(keys, grown, i) == b - 1) kth_best = keys[i];
  const bool any_passes = __syncthreads_or(passes);
  const bool stopped = was_stopped || !any_passes || (grown >= b && best_new <= kth_best);

  // The children among the B best of the union, appended in row order.
  const bool keep = passes && !stopped && Above(keys, n, i) < b;
  if (i >= p && i < n) flags[i - p] = keep;
  const int kept = __syncthreads_count(keep);
  if (keep) {
    const int child = i - p, at = grown + Before(flags, child);
    pool.tokens[at] = top_tokens[child];
    pool.parents[at] = parent;
    pool.scores[at] = score;
    pool.depths[at] = (rule.root ? 0 : pool.depths[parent]) + 1;
    pool.fed[at] = -1;
  }
  const int now = grown + kept;
  __syncthreads();  // the appended entries are visible to the block
  if (i == 0) {
    *pool.count = now;
    *pool.stopped = stopped;
  }

  if (!rule.last) {
    // The next feed: the W best open entries, in entry order.
    const bool open = i < now && !stopped && pool.fed[i] < 0;
    if (i < p) keys[i] = open ? OrderKey(pool.scores[i]) : none;
    __syncthreads();
    const bool chosen = open && Above(keys, p, i) < rule.beams;
    if (i < p) flags[i] = chosen;
    const int feeding = __syncthreads_count(chosen);
    if (chosen) {
      const int slot = Before(flags, i);
      const int64_t up = pool.parents[i];
      pool.beams[slot] = i;
      pool.fed[i] = 1 + static_cast<int64_t>(rule.level) * rule.beams + slot;
      feed_tokens[slot] = pool.tokens[i];
      feed_parents[slot] = up < 0 ? 0 : pool.fed[up];  // expanded at an earlier level
      feed_depths[slot] = pool.depths[i];
    }
    if (i >= feeding && i < rule.beams) {  // dummy rows: under the root, logits ignored
      pool.beams[i] = -1;
      feed_tokens[i] = pool.tokens[0];
      feed_parents[i] = 0;
      feed_depths[i] = 1;
    }
    __syncthreads();  // the feed's reads of keys and flags are done
  }

  // The draft so far: the B best grown entries in entry order, topped up with copies of entry 0.
  if (i < p) keys[i] = i < now ? OrderKey(pool.scores[i]) : none;
  __syncthreads();
  const bool in_tree = i < now && Above(keys, p, i) < b;
  if (i < p) flags[i] = in_tree;
  const int in_draft = __syncthreads_count(in_tree);
  WriteKeptTree(i, in_tree, flags, node_of, pool.tokens, pool.parents, kept_tokens, kept_parents);
  if (i >= in_draft && i < b) {
    kept_tokens[i] = pool.tokens[0];
    kept_parents[i + 1] = 0;
  }
}

}  // namespace

int LaunchGrowLevel(const int64_t* top_tokens, const float* top_logq, int rows, int width, Pool pool, LevelRule rule,
                    int64_t* feed_tokens, int64_t* feed_parents, int64_t* feed_depths, int64_t* kept_tokens,
                    int64_t* kept_parents, void* stream) {
  if (rows < 1 || width < 1 || pool.pool < 1 || pool.pool + rows * width > kMaxItems || rule.budget < 1 ||
      rule.budget > pool.pool || rule.beams < 1 || rule.beams > kMaxItems)
    return cudaErrorInvalidValue;
  GrowLevel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(top_tokens, top_logq, rows, width, pool, rule,
                                                                  feed_tokens, feed_parents, feed_depths, kept_tokens,
                                                                  kept_parents);
  return cudaGetLastError();
}

}  // namespace growth_kernels
}  // namespace speclab
