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
                      const int64_t* __restrict__ start, int max_ngram, int length, int64_t* __restrict__ out) {
  __shared__ unsigned long long best;
  const int64_t s = *start, n = s + 2;
  if (threadIdx.x == 0) {
    context[s] = last_two[0];
    context[s + 1] = last_two[1];
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

}  // namespace

int LaunchNgramContinuation(int64_t* context, int64_t capacity, const int64_t* last_two, const int64_t* start,
                            int max_ngram, int length, int64_t* out, void* stream) {
  if (capacity < 2 || capacity >= (int64_t{1} << 32) || max_ngram < 1 || length < 0) return cudaErrorInvalidValue;
  NgramContinuation<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(context, capacity, last_two, start,
                                                                           max_ngram, length, out);
  return cudaGetLastError();
}

}  // namespace prompt_lookup
}  // namespace speclab
