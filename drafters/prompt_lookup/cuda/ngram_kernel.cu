// The n-gram match in one block; see ngram_kernel.h.
#include "drafters/prompt_lookup/cuda/ngram_kernel.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace speclab {
namespace prompt_lookup {
namespace {

constexpr int kThreads = 1024;

// An n-gram of length k matching the sequence's last k tokens and ending at
// e starts at e - k + 1, so "the longest n, then its first start" is "the
// largest suffix match S(e) (capped at max_ngram), then the smallest end e":
// one key per end, the largest key wins.
__device__ __forceinline__ unsigned long long MatchKey(int k, int64_t e) {
  return (static_cast<unsigned long long>(k) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(e));
}

__global__ void __launch_bounds__(kThreads)
    NgramContinuation(int64_t* context, int64_t capacity, const int64_t* __restrict__ last_two,
                      const int64_t* __restrict__ start, int start_shift, int max_ngram, int length,
                      int64_t* __restrict__ out) {
  __shared__ unsigned long long best;
  const int64_t s = *start + start_shift, n = s + 2;
  if (threadIdx.x == 0) {
    if (last_two != nullptr) {  // else the context holds them (LaunchNgramGuess)
      context[s] = last_two[0];
      context[s + 1] = last_two[1];
    }
    best = 0;
  }
  __syncthreads();
  unsigned long long key = 0;
  for (int64_t e = threadIdx.x; e <= n - 2; e += kThreads) {  // an occurrence must end before the root
    int k = 0;
    while (k < max_ngram && k <= e && context[e - k] == context[n - 1 - k]) ++k;
    if (k > 0 && MatchKey(k, e) > key) key = MatchKey(k, e);
  }
  atomicMax(&best, key);
  __syncthreads();
  if (threadIdx.x != 0) return;
  const int64_t root = context[n - 1];
  const int64_t from = best == 0 ? -1 : static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(best)) + 1;
  out[0] = root;
  for (int j = 0; j < length; ++j) {
    const int64_t at = from + j;
    const int64_t token = from < 0 ? root : at < n ? context[at] : out[1 + at - n];
    out[1 + j] = token;
    if (n + j < capacity) context[n + j] = token;
  }
}

// Every position e before the root whose last k(e) >= 1 tokens are the
// sequence's last k(e) (k capped at max_ngram) starts a candidate at e + 1:
// LookupCandidates' scan meets it first at n = k(e), so its candidates are
// these continuations by (k desc, e asc), each kept unless an earlier one
// equals it, the first max_candidates. Per n, the positions are taken 1024
// at a time: each thread tests one against the kept candidates and the
// chunk's earlier positions, then thread 0 keeps the new ones in order.
constexpr int kSharedTokens = 8192;  // sequences up to this long are read from shared memory

__global__ void __launch_bounds__(kThreads)
    NgramCandidates(const int64_t* __restrict__ context, const int64_t* __restrict__ last_two,
                    const int64_t* __restrict__ start, int max_ngram, int max_tokens, int width, int max_candidates,
                    int64_t* __restrict__ tokens, int64_t* __restrict__ lengths) {
  __shared__ int32_t shared_sequence[kSharedTokens];
  __shared__ int64_t chunk[kThreads];  // the chunk's positions of this n, in order
  __shared__ bool repeated[kThreads];
  __shared__ int64_t kept[kMaxCandidates];
  __shared__ int chunk_size, found, warp_counts[kThreads / 32];
  const int64_t s = *start, n = s + 2;
  const bool in_shared = n <= kSharedTokens;
  auto at = [&](int64_t i) -> int64_t {
    if (in_shared) return shared_sequence[i];
    return i < s ? context[i] : last_two[i - s];
  };
  if (in_shared) {
    for (int64_t i = threadIdx.x; i < n; i += kThreads)
      shared_sequence[i] = static_cast<int32_t>(i < s ? context[i] : last_two[i - s]);
  }
  if (threadIdx.x == 0) found = 0;
  __syncthreads();
  // Continuations from a + 1 and b + 1, of max_tokens tokens or to the end.
  auto same = [&](int64_t a, int64_t b) {
    const int64_t la = min(static_cast<int64_t>(max_tokens), n - 1 - a);
    const int64_t lb = min(static_cast<int64_t>(max_tokens), n - 1 - b);
    if (la != lb) return false;
    for (int64_t t = 0; t < la; ++t)
      if (at(a + 1 + t) != at(b + 1 + t)) return false;
    return true;
  };
  const int top = static_cast<int>(min(static_cast<int64_t>(max_ngram), n - 1));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int k = top; k >= 1 && found < max_candidates; --k) {
    for (int64_t base = 0; base <= n - 2 && found < max_candidates; base += kThreads) {
      const int64_t e = base + threadIdx.x;
      int match = 0;
      if (e <= n - 2)
        while (match < k + 1 && match < max_ngram && match <= e && at(e - match) == at(n - 1 - match)) ++match;
      const bool here = e <= n - 2 && match == k;
      const unsigned ballot = __ballot_sync(0xFFFFFFFFu, here);
      if (lane == 0) warp_counts[warp] = __popc(ballot);
      __syncthreads();
      if (threadIdx.x == 0) {
        int total = 0;
        for (int w = 0; w < kThreads / 32; ++w) {
          const int c = warp_counts[w];
          warp_counts[w] = total;
          total += c;
        }
        chunk_size = total;
      }
      __syncthreads();
      if (here) chunk[warp_counts[warp] + __popc(ballot & ((1u << lane) - 1))] = e;
      __syncthreads();
      for (int r = threadIdx.x; r < chunk_size; r += kThreads) {
        bool dup = false;
        for (int c = 0; c < found && !dup; ++c) dup = same(chunk[r], kept[c]);
        for (int q = 0; q < r && !dup; ++q) dup = same(chunk[r], chunk[q]);
        repeated[r] = dup;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int r = 0; r < chunk_size && found < max_candidates; ++r)
          if (!repeated[r]) kept[found++] = chunk[r];
      }
      __syncthreads();
    }
  }
  const int64_t root = at(n - 1);
  for (int i = threadIdx.x; i < max_candidates * width; i += kThreads) {
    const int c = i / width, t = i % width;
    const int64_t length = c < found ? min(static_cast<int64_t>(max_tokens), n - 1 - kept[c]) : 0;
    tokens[i] = t < length ? at(kept[c] + 1 + t) : root;
    if (t == 0) lengths[c] = length;
  }
}

}  // namespace

namespace {

// NgramContinuation from s = *start + start_shift; last_two null: the context holds them.
int LaunchContinuation(int64_t* context, int64_t capacity, const int64_t* last_two, const int64_t* start,
                       int start_shift, int max_ngram, int length, int64_t* out, void* stream) {
  if (capacity < 2 || capacity >= (int64_t{1} << 32) || max_ngram < 1 || length < 0) return cudaErrorInvalidValue;
  NgramContinuation<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(context, capacity, last_two, start,
                                                                           start_shift, max_ngram, length, out);
  return cudaGetLastError();
}

}  // namespace

int LaunchNgramContinuation(int64_t* context, int64_t capacity, const int64_t* last_two, const int64_t* start,
                            int max_ngram, int length, int64_t* out, void* stream) {
  return LaunchContinuation(context, capacity, last_two, start, 0, max_ngram, length, out, stream);
}

int LaunchNgramGuess(int64_t* sequence, int64_t capacity, const int64_t* root, int max_ngram, int length,
                     int64_t* out, void* stream) {
  return LaunchContinuation(sequence, capacity, nullptr, root, -1, max_ngram, length, out, stream);
}

int LaunchNgramCandidates(const int64_t* context, const int64_t* last_two, const int64_t* start, int max_ngram,
                          int max_tokens, int width, int max_candidates, int64_t* tokens, int64_t* lengths,
                          void* stream) {
  if (max_ngram < 1 || max_tokens < 1 || width < max_tokens || max_candidates < 1 || max_candidates > kMaxCandidates)
    return cudaErrorInvalidValue;
  NgramCandidates<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(context, last_two, start, max_ngram,
                                                                         max_tokens, width, max_candidates, tokens,
                                                                         lengths);
  return cudaGetLastError();
}

}  // namespace prompt_lookup
}  // namespace speclab
