// Lookahead decoding's step on CUDA (lookahead_device.h), following
// pool_rules.h: before the target's forward, one launch of one thread learns
// the text up to the root (pool_from_prompt) and drafts the root's
// continuations (a few slots of one row); after it, one launch takes the
// guesses' argmax, pools each column's n-gram and moves the window on.
//
// Knows nothing of torch: lookahead_device.cc wraps it. Pointers are device
// pointers; `stream` is a cudaStream_t; the launches are asynchronous,
// allocate nothing, never synchronise and return a cudaError_t.
#ifndef SPECLAB_DRAFTERS_LOOKAHEAD_CUDA_LOOKAHEAD_KERNEL_H_
#define SPECLAB_DRAFTERS_LOOKAHEAD_CUDA_LOOKAHEAD_KERNEL_H_

#include <cstdint>

#include "drafters/lookahead/pool_rules.h"

namespace speclab::lookahead {

// The widest window IterateWindow takes (the `window` option's bound).
inline constexpr int kMaxWidth = 64;

// Where `learn`, LearnText (the sequence context[0..*start) then last_two);
// then BranchFromRoot of last_two[1]; then, where `chain` is not null,
// ChainOfFirst of `chain_length` tokens into it.
int LaunchLearnAndBranch(PoolPointers pool, const int64_t* context, const int64_t* last_two, const int64_t* start,
                         int64_t* learned, bool learn, int max_tokens, int max_candidates, int64_t* tokens,
                         int64_t* lengths, int64_t* chain, int chain_length, void* stream);

// One Jacobi iteration from the riders' logits (float32 [levels * width,
// vocab], contiguous): guesses are the argmax of the last level's rows (the
// first of equal maxima, as at::argmax), then AdvanceWindow.
int LaunchIterateWindow(PoolPointers pool, int64_t* window, int levels, int width, const float* logits,
                        const int64_t* standins, int64_t eos, bool remember, void* stream);

}  // namespace speclab::lookahead

#endif  // SPECLAB_DRAFTERS_LOOKAHEAD_CUDA_LOOKAHEAD_KERNEL_H_
