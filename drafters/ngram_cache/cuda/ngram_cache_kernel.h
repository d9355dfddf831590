// The ngram_cache drafter's step on CUDA (DeviceNgramTable::LearnAndDraft,
// LearnAndBranch): the LRU table learns the text up to the root, then drafts
// a chain or a trie's candidates from it, in one single-block launch.
//
// Knows nothing of torch: device_ngram_table.cc wraps it. Pointers are
// device pointers; `stream` is a cudaStream_t; the launch is asynchronous,
// allocates nothing, never synchronises and returns a cudaError_t.
#ifndef SPECLAB_DRAFTERS_NGRAM_CACHE_CUDA_NGRAM_CACHE_KERNEL_H_
#define SPECLAB_DRAFTERS_NGRAM_CACHE_CUDA_NGRAM_CACHE_KERNEL_H_

#include <cstdint>

namespace speclab {
namespace ngram_cache {

// The table (device_ngram_table.h): `rows` keys of `leader` tokens with a
// stamp each, `columns` followers of `follower` tokens per row with a stamp
// each (0: empty; larger: more recent), the clock (the last stamp given) and
// `learned`, the position up to which the generation's text was learned.
struct TablePointers {
  int64_t* keys;             // [rows, leader]
  int64_t* row_stamps;       // [rows]
  int64_t* followers;        // [rows, columns, follower]
  int64_t* follower_stamps;  // [rows, columns]
  int64_t* clock;            // [1]
  int64_t* learned;          // [1]
  int leader, follower, rows, columns;
};

// The sequence is context[0..s) then last_two[0..1] (s = *start; the root
// last, at s + 1). Learns every window of leader + follower tokens that ends
// at a position in [*learned, s + 2), in order, and sets *learned = s + 2;
// then writes out[0] = the root and out[1..length]: the drafts of
// FixedLengthCachedContinuation (ngram_cache_drafter.h) from the table.
int LaunchLearnAndDraft(TablePointers table, const int64_t* context, const int64_t* last_two, const int64_t* start,
                        int length, bool recursive, int64_t* out, void* stream);

// The most candidates LaunchLearnAndBranch keeps.
inline constexpr int kMaxCandidates = 64;

// Learns as LaunchLearnAndDraft, then writes CachedContinuations()
// (ngram_cache_drafter.h) of the sequence: candidate c is tokens[c *
// max_tokens ..] of lengths[c] tokens (0 past the last found; the entries past
// a candidate hold the root). max_candidates <= kMaxCandidates.
int LaunchLearnAndBranch(TablePointers table, const int64_t* context, const int64_t* last_two, const int64_t* start,
                         int max_tokens, int max_candidates, bool recursive, int64_t* tokens, int64_t* lengths,
                         void* stream);

}  // namespace ngram_cache
}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_NGRAM_CACHE_CUDA_NGRAM_CACHE_KERNEL_H_
