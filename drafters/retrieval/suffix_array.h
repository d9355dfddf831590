// The suffix array of a token sequence, and the range of suffixes that start
// with a query: REST's datastore index (docs/algorithms.md §4.6).
#ifndef SPECLAB_DRAFTERS_RETRIEVAL_SUFFIX_ARRAY_H_
#define SPECLAB_DRAFTERS_RETRIEVAL_SUFFIX_ARRAY_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace speclab::retrieval {

// The start positions of the suffixes of `tokens`, in lexicographic order of
// the suffixes (a suffix before its extensions). Prefix doubling: O(n log^2 n).
std::vector<int64_t> BuildSuffixArray(absl::Span<const int32_t> tokens);

// [first, last): the entries of `suffixes` (BuildSuffixArray(tokens)) whose
// suffix starts with `query`. Binary search: O(|query| log n).
std::pair<int64_t, int64_t> MatchRange(absl::Span<const int32_t> tokens, absl::Span<const int64_t> suffixes,
                                       absl::Span<const int32_t> query);

}  // namespace speclab::retrieval

#endif  // SPECLAB_DRAFTERS_RETRIEVAL_SUFFIX_ARRAY_H_
