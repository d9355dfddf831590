// The prompt-lookup drafter's step on CUDA (PromptLookupDrafter::ContinuationAt):
// the n-gram match and its continuation in one single-block launch.
//
// Knows nothing of torch: prompt_lookup_drafter.cc wraps it. Pointers are
// device pointers; `stream` is a cudaStream_t; the launch is asynchronous,
// allocates nothing, never synchronises and returns a cudaError_t.
#ifndef SPECLAB_DRAFTERS_PROMPT_LOOKUP_CUDA_NGRAM_KERNEL_H_
#define SPECLAB_DRAFTERS_PROMPT_LOOKUP_CUDA_NGRAM_KERNEL_H_

#include <cstdint>

namespace speclab {
namespace prompt_lookup {

// context [capacity] int64 holds the sequence before position s = *start.
// Writes last_two[0..1] at s and s + 1 (the sequence then has n = s + 2
// tokens, the root last), finds the match LookupContinuation() finds (the
// longest suffix of at most max_ngram tokens that occurred earlier, its
// first occurrence) and writes out[0] = the root, out[1 + j] = the token
// `from + j` of the sequence extended by these drafts (from: the position
// after the match), or the root where nothing matched, for j < length; the
// drafts also go to context[n + j] (where below capacity), so that the next
// call finds the accepted ones in place. Requires s + 2 <= capacity.
int LaunchNgramContinuation(int64_t* context, int64_t capacity, const int64_t* last_two, const int64_t* start,
                            int max_ngram, int length, int64_t* out, void* stream);

// The same continuation of a sequence that already holds the root, at
// position *root of sequence [capacity] (PromptLookupDrafter::GuessOf):
// LaunchNgramContinuation with s = *root - 1 and the last two tokens read
// in place. Requires *root + 1 <= capacity.
int LaunchNgramGuess(int64_t* sequence, int64_t capacity, const int64_t* root, int max_ngram, int length,
                     int64_t* out, void* stream);

// The most candidates one launch keeps.
inline constexpr int kMaxCandidates = 64;

// The sequence is context[0..s) then last_two[0..1] (s = *start; the root
// last). Writes LookupCandidates(sequence, max_ngram, max_tokens,
// max_candidates) (prompt_lookup_drafter.h): candidate c's tokens to
// tokens[c * width ..] (the root past its end) and its length to lengths[c]
// (0 where fewer were found). max_tokens <= width; max_candidates <=
// kMaxCandidates.
int LaunchNgramCandidates(const int64_t* context, const int64_t* last_two, const int64_t* start, int max_ngram,
                          int max_tokens, int width, int max_candidates, int64_t* tokens, int64_t* lengths,
                          void* stream);

}  // namespace prompt_lookup
}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_PROMPT_LOOKUP_CUDA_NGRAM_KERNEL_H_
