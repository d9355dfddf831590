// Lookahead decoding's step on CUDA (device_lookahead.h): the pool learns the
// text up to the root and drafts the root's continuations, and after the
// target's forward the window takes one Jacobi iteration, each in one launch
// of one thread (a few n-grams a step, in order), following pool_rules.h.
//
// Knows nothing of torch: device_lookahead.cc wraps it. Pointers are device
// pointers; `stream` is a cudaStream_t; the launches are asynchronous,
// allocate nothing, never synchronise and return a cudaError_t.
#ifndef SPECLAB_DRAFTERS_LOOKAHEAD_CUDA_LOOKAHEAD_KERNEL_H_
#define SPECLAB_DRAFTERS_LOOKAHEAD_CUDA_LOOKAHEAD_KERNEL_H_

#include <cstdint>

#include "drafters/lookahead/pool_rules.h"

namespace speclab::lookahead {

// Where `learn`, LearnText (the sequence context[0..*start) then last_two);
// then BranchFromRoot of last_two[1].
int LaunchLearnAndBranch(PoolPointers pool, const int64_t* context, const int64_t* last_two, const int64_t* start,
                         int64_t* learned, bool learn, int max_tokens, int max_candidates, int64_t* tokens,
                         int64_t* lengths, void* stream);

// AdvanceWindow.
int LaunchAdvanceWindow(PoolPointers pool, int64_t* window, int levels, int width, const int64_t* guesses,
                        const int64_t* standins, int64_t eos, bool remember, void* stream);

}  // namespace speclab::lookahead

#endif  // SPECLAB_DRAFTERS_LOOKAHEAD_CUDA_LOOKAHEAD_KERNEL_H_
