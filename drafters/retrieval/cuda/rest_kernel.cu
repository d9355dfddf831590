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

// The longest suffix of the sequence context[0..s) then last_two (s =
// *start) that the store holds, of max_suffix down to min_suffix tokens (a
// warp a length, 32 lengths a round), and its first max_matches occurrences:
// *matched (0: none) and the suffix array's range[0..2). Skipped where `skip`
// (nothing is to be drafted). Every thread gets them.
__device__ void FindLongestMatch(const StorePointers& store, const LookupShape& shape, const int64_t* context,
                                 const int64_t* last_two, const int64_t* start, bool skip, int32_t* query,
                                 int* matched, int64_t* range) {
  __shared__ int64_t warp_first[kWarps], warp_last[kWarps];
  const int64_t s = *start, n = s + 2;
  const int longest = static_cast<int>(n < shape.max_suffix ? n : shape.max_suffix);
  for (int k = threadIdx.x; k < longest; k += kThreads) {
    const int64_t p = n - longest + k;
    query[k] = static_cast<int32_t>(p < s ? context[p] : last_two[p - s]);
  }
  if (threadIdx.x == 0) *matched = 0;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int top = longest; !skip && top >= shape.min_suffix; top -= kWarps) {
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
        *matched = top - w;
        range[0] = warp_first[w];
        range[1] = warp_last[w] < warp_first[w] + shape.max_matches ? warp_last[w] : warp_first[w] + shape.max_matches;
        break;
      }
    }
    __syncthreads();
    if (*matched > 0) break;
  }
}

__global__ void __launch_bounds__(kThreads)
    RestContinuation(StorePointers store, LookupShape shape, const int64_t* __restrict__ context,
                     const int64_t* __restrict__ last_two, const int64_t* __restrict__ start, int length,
                     int64_t* __restrict__ out) {
  __shared__ int32_t query[kKernelMaxSuffix];  // the sequence's last max_suffix tokens
  __shared__ int32_t next[kKernelMaxMatches];  // a depth's next token per match (-1: the datastore ended)
  __shared__ int64_t range[2];         // the matches the path so far continues
  __shared__ int matched;              // the longest suffix found (0: none)
  __shared__ unsigned long long best;  // a depth's longest run: length << 32 | ~start
  __shared__ int written;              // drafts found
  const int cap = length < shape.continuation_tokens ? length : shape.continuation_tokens;
  if (threadIdx.x == 0) written = 0;
  FindLongestMatch(store, shape, context, last_two, start, cap <= 0, query, &matched, range);

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

// Block-wide scans over one int a thread, in thread order: the sum over the
// threads before this one (and the block's total), and the least over the
// threads after it (`none` where there are none).
__device__ int BlockExclusiveSum(int value, int* total) {
  __shared__ int warp_sums[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int inclusive = value;
  for (int offset = 1; offset < 32; offset *= 2) {
    const int other = __shfl_up_sync(kAllLanes, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int sums = warp_sums[lane];
    for (int offset = 1; offset < 32; offset *= 2) {
      const int other = __shfl_up_sync(kAllLanes, sums, offset);
      if (lane >= offset) sums += other;
    }
    warp_sums[lane] = sums;
  }
  __syncthreads();
  const int before = (warp > 0 ? warp_sums[warp - 1] : 0) + inclusive - value;
  *total = warp_sums[kWarps - 1];
  __syncthreads();  // before the next scan writes warp_sums
  return before;
}

__device__ int BlockSuffixMin(int value, int none) {
  __shared__ int warp_mins[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int inclusive = value;  // the least over this lane and the lanes after it
  for (int offset = 1; offset < 32; offset *= 2) {
    const int other = __shfl_down_sync(kAllLanes, inclusive, offset);
    if (lane + offset < 32 && other < inclusive) inclusive = other;
  }
  const int after_lane = __shfl_down_sync(kAllLanes, inclusive, 1);
  if (lane == 0) warp_mins[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    int mins = warp_mins[lane];
    for (int offset = 1; offset < 32; offset *= 2) {
      const int other = __shfl_down_sync(kAllLanes, mins, offset);
      if (lane + offset < 32 && other < mins) mins = other;
    }
    warp_mins[lane] = mins;
  }
  __syncthreads();
  int after = warp + 1 < kWarps ? warp_mins[warp + 1] : none;
  if (lane < 31 && after_lane < after) after = after_lane;
  __syncthreads();  // before the next scan writes warp_mins
  return after;
}

// REST's tree: the first max_candidates prefixes of the matches'
// continuations by (count desc, depth asc, first match asc), the order of
// MostFrequentPrefixes (rest_lookup.h). Match j starts the prefix (j, d) at
// every depth d at or past what it shares with match j - 1 and before its
// continuation's end (CountContinuations' rule); the prefix counts the
// matches up to the next one that shares at most d tokens with the one
// before it (a boundary at depth d). Thread t holds matches 8t .. 8t + 7; a
// depth's counts take one scan for the boundaries. A histogram of the counts
// gives the threshold count; the prefixes above it, and the first ties in
// (depth, match) order, are the candidates.
constexpr int kItems = kKernelMaxMatches / kThreads;

struct MatchItems {
  int reach[kItems];   // the continuation's tokens, cut at cap and the store's end
  int shared[kItems];  // tokens shared with the match before (0 for the first)
};

// This thread's matches, of `matches` from the suffix array's entry `first`.
__device__ MatchItems ReadMatches(const StorePointers& store, int64_t first, int matched, int matches, int cap) {
  MatchItems items;
  auto reach = [&](int64_t from) {
    const int64_t left = store.size - from;
    return static_cast<int>(left < cap ? left : cap);
  };
  for (int i = 0; i < kItems; ++i) {
    const int j = threadIdx.x * kItems + i;
    items.reach[i] = items.shared[i] = 0;
    if (j >= matches) continue;
    const int64_t from = store.suffixes[first + j] + matched;
    items.reach[i] = reach(from);
    if (j == 0) continue;
    const int64_t before = store.suffixes[first + j - 1] + matched;
    const int both = items.reach[i] < reach(before) ? items.reach[i] : reach(before);
    int same = 0;
    while (same < both && store.tokens[from + same] == store.tokens[before + same]) ++same;
    items.shared[i] = same;
  }
  return items;
}

// The count of the prefix each of this thread's matches starts at `depth`
// (0 where it starts none).
__device__ void CountsAtDepth(const MatchItems& items, int matches, int depth, int* counts) {
  const int base = threadIdx.x * kItems;
  auto boundary = [&](int i) { return base + i >= matches || items.shared[i] <= depth; };
  int mine = kKernelMaxMatches;  // this thread's first boundary
  for (int i = kItems - 1; i >= 0; --i)
    if (boundary(i)) mine = base + i;
  int next = BlockSuffixMin(mine, kKernelMaxMatches);  // the first boundary past this thread's matches
  if (next > matches) next = matches;
  for (int i = kItems - 1; i >= 0; --i) {
    const bool starts = base + i < matches && items.shared[i] <= depth && depth < items.reach[i];
    counts[i] = starts ? next - (base + i) : 0;
    if (boundary(i)) next = base + i < matches ? base + i : matches;
  }
}

__global__ void __launch_bounds__(kThreads)
    RestCandidates(StorePointers store, LookupShape shape, const int64_t* __restrict__ context,
                   const int64_t* __restrict__ last_two, const int64_t* __restrict__ start, int max_tokens,
                   int max_candidates, int64_t* __restrict__ tokens, int64_t* __restrict__ lengths) {
  static_assert(kKernelMaxSuffix <= kKernelMaxMatches, "the query lives in the histogram's place");
  __shared__ int histogram[kKernelMaxMatches];  // prefixes by count - 1; the query's tokens while searching
  __shared__ int64_t range[2];
  __shared__ int matched, deepest, threshold, above, ties_before, kept;
  __shared__ unsigned long long chosen[kMaxCandidates];  // count << 40 | ~depth << 20 | ~match
  const int cap = max_tokens < shape.continuation_tokens ? max_tokens : shape.continuation_tokens;
  FindLongestMatch(store, shape, context, last_two, start, cap <= 0, reinterpret_cast<int32_t*>(histogram),
                   &matched, range);
  const int matches = matched > 0 ? static_cast<int>(range[1] - range[0]) : 0;
  const MatchItems items = ReadMatches(store, range[0], matched, matches, cap);
  const int base = threadIdx.x * kItems;
  if (threadIdx.x == 0) deepest = threshold = above = ties_before = kept = 0;
  __syncthreads();  // the query is read: the histogram takes its place
  for (int c = threadIdx.x; c < kKernelMaxMatches; c += kThreads) histogram[c] = 0;
  int reach = 0;
  for (int i = 0; i < kItems; ++i) reach = items.reach[i] > reach ? items.reach[i] : reach;
  if (reach > 0) atomicMax(&deepest, reach);
  __syncthreads();

  // Every prefix's count into the histogram.
  int counts[kItems], prefixes = 0;
  for (int depth = 0; depth < deepest; ++depth) {
    CountsAtDepth(items, matches, depth, counts);
    for (int i = 0; i < kItems; ++i) {
      if (counts[i] == 0) continue;
      atomicAdd(&histogram[counts[i] - 1], 1);
      ++prefixes;
    }
  }
  int total;
  BlockExclusiveSum(prefixes, &total);  // its syncs also publish the histogram
  const int wanted = total < max_candidates ? total : max_candidates;

  // The threshold: the largest count c with at least `wanted` prefixes of
  // count >= c, of which `above` count more.
  int bins = 0;
  for (int i = 0; i < kItems; ++i) bins += histogram[base + i];
  int all;
  const int bins_before = BlockExclusiveSum(bins, &all);
  int at_least = all - bins_before;  // prefixes counting base + 1 or more
  for (int i = 0; i < kItems && wanted > 0; ++i) {
    const int more = at_least - histogram[base + i];  // counting more than base + i + 1
    if (at_least >= wanted && more < wanted) {       // one thread, one i
      threshold = base + i + 1;
      above = more;
    }
    at_least = more;
  }
  __syncthreads();

  // The prefixes counting more than the threshold, and the first ties in
  // (depth, match) order.
  for (int depth = 0; wanted > 0 && depth < deepest; ++depth) {
    CountsAtDepth(items, matches, depth, counts);
    int ties = 0;
    for (int i = 0; i < kItems; ++i) ties += counts[i] == threshold;
    int depth_ties;
    int rank = ties_before + BlockExclusiveSum(ties, &depth_ties);  // of this thread's first tie
    for (int i = 0; i < kItems; ++i) {
      const bool tie = counts[i] == threshold;
      if (counts[i] > threshold || (tie && rank < wanted - above))
        chosen[atomicAdd(&kept, 1)] = (static_cast<unsigned long long>(counts[i]) << 40) |
                                      (static_cast<unsigned long long>(0xFFFFF - depth) << 20) |
                                      static_cast<unsigned long long>(0xFFFFF - (base + i));
      rank += tie;
    }
    __syncthreads();
    if (threadIdx.x == 0) ties_before += depth_ties;
    __syncthreads();
  }
  if (threadIdx.x == 0) {  // best first: at most kMaxCandidates
    for (int a = 1; a < kept; ++a) {
      const unsigned long long key = chosen[a];
      int b = a;
      for (; b > 0 && chosen[b - 1] < key; --b) chosen[b] = chosen[b - 1];
      chosen[b] = key;
    }
  }
  __syncthreads();

  const int64_t root = last_two[1];
  for (int c = threadIdx.x; c < max_candidates; c += kThreads)
    lengths[c] = c < kept ? 0xFFFFF - static_cast<int>((chosen[c] >> 20) & 0xFFFFF) + 1 : 0;
  for (int e = threadIdx.x; e < max_candidates * max_tokens; e += kThreads) {
    const int c = e / max_tokens, t = e % max_tokens;
    int64_t token = root;
    if (c < kept) {
      const int depth = 0xFFFFF - static_cast<int>((chosen[c] >> 20) & 0xFFFFF);
      const int j = 0xFFFFF - static_cast<int>(chosen[c] & 0xFFFFF);
      if (t <= depth) token = store.tokens[store.suffixes[range[0] + j] + matched + t];
    }
    tokens[e] = token;
  }
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

int LaunchRestCandidates(StorePointers store, LookupShape shape, const int64_t* context, const int64_t* last_two,
                         const int64_t* start, int max_tokens, int max_candidates, int64_t* tokens, int64_t* lengths,
                         void* stream) {
  if (shape.max_suffix < 1 || shape.max_suffix > kKernelMaxSuffix || shape.min_suffix < 1 || shape.max_matches < 1 ||
      shape.max_matches > kKernelMaxMatches || shape.continuation_tokens < 1 || max_tokens < 1 ||
      max_candidates < 1 || max_candidates > kMaxCandidates || store.size < 0)
    return cudaErrorInvalidValue;
  RestCandidates<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(store, shape, context, last_two, start,
                                                                        max_tokens, max_candidates, tokens, lengths);
  return cudaGetLastError();
}

}  // namespace retrieval
}  // namespace speclab
