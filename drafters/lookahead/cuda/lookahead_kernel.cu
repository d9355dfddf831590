// See lookahead_kernel.h. The drafts are one thread's; the iteration is a
// block's: a warp per column takes its argmax, then each column pools its
// n-gram (columns of distinct keys at once, those of one key in column order,
// each with the stamp pool_rules.h's loop gives it) and moves itself on.
#include "drafters/lookahead/cuda/lookahead_kernel.h"

#include <cuda_runtime.h>

namespace speclab::lookahead {
namespace {

__global__ void LearnAndBranchKernel(PoolPointers pool, const int64_t* context, const int64_t* last_two,
                                     const int64_t* start, int64_t* learned, bool learn, int max_tokens,
                                     int max_candidates, int64_t* tokens, int64_t* lengths, int64_t* chain,
                                     int chain_length) {
  if (learn) LearnText(pool, context, last_two, *start, learned);
  BranchFromRoot(pool, last_two[1], max_tokens, max_candidates, tokens, lengths);
  if (chain != nullptr) ChainOfFirst(tokens, lengths, last_two[1], chain_length, chain);
}

__global__ void IterateWindowKernel(PoolPointers pool, int64_t* window, int levels, int width, const float* logits,
                                    const int64_t* standins, int64_t eos, bool remember) {
  __shared__ int64_t guesses[kMaxWidth];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  // The guesses: each last-level row's argmax, a warp a row.
  for (int c = warp; c < width; c += warps) {
    const float* row = logits + (static_cast<int64_t>(levels - 1) * width + c) * pool.vocab;
    float best = -INFINITY;
    int64_t at = -1;
    for (int64_t v = lane; v < pool.vocab; v += 32) {
      if (at < 0 || row[v] > best) {
        best = row[v];
        at = v;
      }
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xffffffffu, best, offset);
      const int64_t other_at = __shfl_down_sync(0xffffffffu, at, offset);
      if (other_at >= 0 && (at < 0 || other > best || (other == best && other_at < at))) {
        best = other;
        at = other_at;
      }
    }
    if (lane == 0) guesses[c] = at;
  }
  __syncthreads();
  const int c = threadIdx.x;
  const bool column = c < width;
  int64_t key = 0, follower[kMaxFollower];
  int rank = 0;
  if (column) {
    key = window[c];
    for (int j = 1; j < levels; ++j) follower[j - 1] = window[j * width + c];
    follower[levels - 1] = guesses[c];
    for (int k = 0; k < c; ++k) rank += window[k] == key;
  }
  const int64_t clock = *pool.clock;
  __syncthreads();  // every column read the window and the clock
  if (remember) {
    for (int round = 0; round < width; ++round) {
      if (column && rank == round) RememberNgramAt(pool, key, follower, clock + c + 1);
      __syncthreads();
    }
    if (threadIdx.x == 0) *pool.clock = clock + width;
  }
  if (column) {
    for (int j = 0; j + 1 < levels; ++j) window[j * width + c] = follower[j];
    window[(levels - 1) * width + c] = guesses[c] == eos ? standins[c] : guesses[c];
  }
}

}  // namespace

int LaunchLearnAndBranch(PoolPointers pool, const int64_t* context, const int64_t* last_two, const int64_t* start,
                         int64_t* learned, bool learn, int max_tokens, int max_candidates, int64_t* tokens,
                         int64_t* lengths, int64_t* chain, int chain_length, void* stream) {
  if (pool.follower < 1 || pool.follower > kMaxFollower || pool.columns < 1 || max_tokens < 1 || max_candidates < 1 ||
      (chain != nullptr && chain_length > max_tokens))
    return cudaErrorInvalidValue;
  LearnAndBranchKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(
      pool, context, last_two, start, learned, learn, max_tokens, max_candidates, tokens, lengths, chain, chain_length);
  return cudaGetLastError();
}

int LaunchIterateWindow(PoolPointers pool, int64_t* window, int levels, int width, const float* logits,
                        const int64_t* standins, int64_t eos, bool remember, void* stream) {
  if (levels != pool.follower || levels > kMaxFollower || width < 1 || width > kMaxWidth || pool.vocab < 1)
    return cudaErrorInvalidValue;
  const int threads = 32 * (width < 32 ? (width < 2 ? 2 : width) : 32);  // a warp a column, at least 64 threads
  IterateWindowKernel<<<1, threads, 0, static_cast<cudaStream_t>(stream)>>>(pool, window, levels, width, logits,
                                                                           standins, eos, remember);
  return cudaGetLastError();
}

}  // namespace speclab::lookahead
