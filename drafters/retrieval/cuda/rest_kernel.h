// The retrieval drafter's chain on CUDA (DeviceRestLookup::Draft): the
// longest suffix of the sequence that the datastore holds, then the walk down
// its continuations' most frequent next tokens, in one single-block launch.
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

}  // namespace retrieval
}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_RETRIEVAL_CUDA_REST_KERNEL_H_
