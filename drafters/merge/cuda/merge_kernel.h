// The merge drafter's candidates on CUDA (MergeDrafter::ContinuationsAt):
// its parts' candidates, in the merge's order, with the empty and the
// repeated ones dropped, in one single-block launch.
//
// Knows nothing of torch: merge_drafter.cc wraps it. Pointers are device
// pointers; `stream` is a cudaStream_t; the launch is asynchronous,
// allocates nothing, never synchronises and returns a cudaError_t.
#ifndef SPECLAB_DRAFTERS_MERGE_CUDA_MERGE_KERNEL_H_
#define SPECLAB_DRAFTERS_MERGE_CUDA_MERGE_KERNEL_H_

#include <cstdint>

namespace speclab {
namespace merge {

// The most candidates one launch reads (the parts' together).
inline constexpr int kMaxMergedCandidates = 1024;

// Candidate i is in_tokens[i * width ..] of in_lengths[i] tokens, i <
// count, in the merge's order. Writes the first max_candidates of those
// that are not empty and not equal to an earlier one (same length, same
// tokens) to out_tokens [max_candidates, width] and out_lengths, in order;
// the rows past them get length 0 and *root throughout. count <=
// kMaxMergedCandidates.
int LaunchMergeCandidates(const int64_t* in_tokens, const int64_t* in_lengths, int count, int width,
                          int max_candidates, const int64_t* root, int64_t* out_tokens, int64_t* out_lengths,
                          void* stream);

}  // namespace merge
}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_MERGE_CUDA_MERGE_KERNEL_H_
