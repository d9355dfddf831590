// The retrieval drafter's lookups on CUDA (DeviceRestLookup): the longest
// suffix of the sequence that the datastore holds, then the walk down its
// continuations' most frequent next tokens (a chain) or their most frequent
// prefixes (a trie's candidates), in one single-block launch.
//
// Knows nothing of torch: device_rest_lookup.cc wraps it. Pointers are
// device pointers; `stream` is a cudaStream_t; the launch is asynchronous,
// allocates nothing, never synchronises and returns a cudaError_t.
#ifndef SPECLAB_DRAFTERS_RETRIEVAL_CUDA_REST_KERNEL_H_
#define SPECLAB_DRAFTERS_RETRIEVAL_CUDA_REST_KERNEL_H_

#include <cstdint>

namespace speclab {
namespace retrieval {

// What one launch holds in shared memory: the longest suffix searched and
// the most matches read.
inline constexpr int kKernelMaxSuffix = 1024;
inline constexpr int kKernelMaxMatches = 8192;

// The datastore (datastore.h) on the device.
struct StorePointers {
  const int32_t* tokens;    // [size]
  const int64_t* suffixes;  // [size]: the suffix array
  int64_t size;
};

// REST's options (rest_lookup.h's RestOptions), max_suffix <=
// kKernelMaxSuffix and max_matches <= kKernelMaxMatches.
struct LookupShape {
  int max_suffix, min_suffix;
  int64_t max_matches;
  int continuation_tokens;
};

// The sequence is context[0..s) then last_two[0..1] (s = *start; the root
// last, at s + 1). Writes out[0] = the root and out[1..length]:
// ToFixedLength(MostFrequentPath(CountContinuations(store, sequence, shape,
// length)), length, root) (rest_lookup.h, drafters/common/fixed_length.h).
int LaunchRestContinuation(StorePointers store, LookupShape shape, const int64_t* context, const int64_t* last_two,
                           const int64_t* start, int length, int64_t* out, void* stream);

// The most candidates LaunchRestCandidates keeps.
inline constexpr int kMaxCandidates = 64;

// Writes MostFrequentPrefixes(CountContinuations(store, sequence, shape,
// max_tokens), max_candidates) (rest_lookup.h): candidate c is tokens[c *
// max_tokens ..] of lengths[c] tokens (0 past the last found; the entries
// past a candidate hold the root). max_candidates <= kMaxCandidates.
int LaunchRestCandidates(StorePointers store, LookupShape shape, const int64_t* context, const int64_t* last_two,
                         const int64_t* start, int max_tokens, int max_candidates, int64_t* tokens, int64_t* lengths,
                         void* stream);

}  // namespace retrieval
}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_RETRIEVAL_CUDA_REST_KERNEL_H_
