// REST's chain in one block; see rest_kernel.h and device_rest_lookup.h for
// why the walk over runs of the suffix array is the count over prefixes.
#include "drafters/retrieval/cuda/rest_kernel.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace speclab {
namespace retrieval {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kAllLanes = 0xFFFFFFFFu;

// The suffix at `start` against the query's `length` tokens: < 0, 0 (the
// suffix starts with the query) or > 0, as suffix_array.cc's CompareToQuery.
__device__ int CompareToQuery(const StorePointers& store, int64_t start, const int32_t* query, int length) {
  for (int i = 0; i < length; ++i) {
    if (start + i >= store.size) return -1;  // a proper prefix of the query sorts before it
    const int32_t t = store.tokens[start + i];
    if (t != query[i]) return t < query[i] ? -1 : 1;
  }
  return 0;
}

// The first index in [lo, hi) where `holds` turns false (it holds on a
// prefix of the range), found by one warp: each round's 32 probes cut the
// range into 33 parts, so a datastore of 10^7 tokens takes five rounds.
template <typename Holds>
__device__ int64_t WarpPartitionPoint(int64_t lo, int64_t hi, Holds holds) {
  const int lane = threadIdx.x % 32;
  while (hi - lo > 32) {
    const int64_t width = hi - lo;
    const int k = __popc(__ballot_sync(kAllLanes, holds(lo + width * (lane + 1) / 33)));
    const int64_t next_lo = k == 0 ? lo : lo + width * k / 33 + 1;  // past lane k - 1's probe, which holds
    hi = k == 32 ? hi : lo + width * (k + 1) / 33;                  // lane k's probe, which does not
    lo = next_lo;
  }
  return lo + __popc(__ballot_sync(kAllLanes, lo + lane < hi && holds(lo + lane)));
}

__global__ void __launch_bounds__(kThreads)
    RestContinuation(StorePointers store, LookupShape shape, const int64_t* __restrict__ context,
                     const int64_t* __restrict__ last_two, const int64_t* __restrict__ start, int length,
                     int64_t* __restrict__ out) {
  __shared__ int32_t query[kKernelMaxSuffix];  // the sequence's last `longest` tokens
  __shared__ int32_t next[kKernelMaxMatches];  // a depth's next token per match (-1: the datastore ended)
  __shared__ int64_t warp_first[kWarps], warp_last[kWarps];
  __shared__ int64_t range[2];         // the matches the path so far continues
  __shared__ int matched;              // the longest suffix found (0: none)
  __shared__ unsigned long long best;  // a depth's longest run: length << 32 | ~start
  __shared__ int written;              // drafts found
  const int64_t s = *start, n = s + 2;
  const int longest = static_cast<int>(n < shape.max_suffix ? n : shape.max_suffix);
  const int cap = length < shape.continuation_tokens ? length : shape.continuation_tokens;
  for (int k = threadIdx.x; k < longest; k += kThreads) {
    const int64_t p = n - longest + k;
    query[k] = static_cast<int32_t>(p < s ? context[p] : last_two[p - s]);
  }
  if (threadIdx.x == 0) matched = written = 0;
  __syncthreads();

  // The longest suffix with an occurrence: a warp a length, 32 lengths a round.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int top = longest; cap > 0 && top >= shape.min_suffix; top -= kWarps) {
    const int length_here = top - warp;
    if (length_here >= shape.min_suffix) {
      const int32_t* q = query + (longest - length_here);
      const int64_t first = WarpPartitionPoint(0, store.size, [&](int64_t i) {
        return CompareToQuery(store, store.suffixes[i], q, length_here) < 0;
      });
      const int64_t last = WarpPartitionPoint(first, store.size, [&](int64_t i) {
        return CompareToQuery(store, store.suffixes[i], q, length_here) == 0;
      });
      if (lane == 0) {
        warp_first[warp] = first;
        warp_last[warp] = last;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 0; w < kWarps && top - w >= shape.min_suffix; ++w) {
        if (warp_last[w] == warp_first[w]) continue;
        matched = top - w;
        range[0] = warp_first[w];
        range[1] = warp_last[w] < warp_first[w] + shape.max_matches ? warp_last[w] : warp_first[w] + shape.max_matches;
        break;
      }
    }
    __syncthreads();
    if (matched > 0) break;
  }

  // Down the continuations: the matches continuing the path so far are a
  // run of the suffix array, sorted by their next token, so each next
  // token's count is the length of its run, and the run first in the array
  // holds the token the host's count saw first.
  if (matched > 0) {
    int64_t lo = range[0], hi = range[1];
    for (int depth = 0; depth < cap; ++depth) {
      const int count = static_cast<int>(hi - lo);
      if (count == 1) {  // one match left: its own continuation
        if (threadIdx.x == 0) {
          const int64_t from = store.suffixes[lo] + matched;
          int d = depth;
          for (; d < cap && from + d < store.size; ++d) out[1 + d] = store.tokens[from + d];
          written = d;
        }
        break;
      }
      for (int j = threadIdx.x; j < count; j += kThreads) {
        const int64_t p = store.suffixes[lo + j] + matched + depth;
        next[j] = p < store.size ? store.tokens[p] : -1;
      }
      if (threadIdx.x == 0) best = 0;
      __syncthreads();
      unsigned long long key = 0;
      for (int j = threadIdx.x; j < count; j += kThreads) {
        const int32_t t = next[j];
        if (t < 0 || (j > 0 && next[j - 1] == t)) continue;  // not a run's start
        int end = j + 1, stop = count;  // the run's end: the first larger token
        while (end < stop) {
          const int middle = (end + stop) / 2;
          if (next[middle] == t) {
            end = middle + 1;
          } else {
            stop = middle;
          }
        }
        const unsigned long long run =
            (static_cast<unsigned long long>(end - j) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(j));
        if (run > key) key = run;
      }
      if (key != 0) atomicMax(&best, key);
      __syncthreads();
      const unsigned long long won = best;
      if (won == 0) break;  // every match ended with the datastore
      const int at = static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(won));
      if (threadIdx.x == 0) {
        out[1 + depth] = next[at];
        written = depth + 1;
      }
      lo += at;
      hi = lo + static_cast<int64_t>(won >> 32);
      __syncthreads();  // next[] and best are written again
    }
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const int64_t root = last_two[1];
  out[0] = root;
  for (int j = written; j < length; ++j) out[1 + j] = j > 0 ? out[j] : root;  // the last token repeated
}

}  // namespace

int LaunchRestContinuation(StorePointers store, LookupShape shape, const int64_t* context, const int64_t* last_two,
                           const int64_t* start, int length, int64_t* out, void* stream) {
  if (shape.max_suffix < 1 || shape.max_suffix > kKernelMaxSuffix || shape.min_suffix < 1 || shape.max_matches < 1 ||
      shape.max_matches > kKernelMaxMatches || shape.continuation_tokens < 1 || length < 0 || store.size < 0)
    return cudaErrorInvalidValue;
  RestContinuation<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(store, shape, context, last_two, start,
                                                                          length, out);
  return cudaGetLastError();
}

}  // namespace retrieval
}  // namespace speclab
