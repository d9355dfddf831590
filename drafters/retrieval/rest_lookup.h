// REST's lookup (docs/algorithms.md §4.6): the continuations a datastore
// holds after the longest suffix of the context it contains, counted in a
// trie of their prefixes.
#ifndef SPECLAB_DRAFTERS_RETRIEVAL_REST_LOOKUP_H_
#define SPECLAB_DRAFTERS_RETRIEVAL_REST_LOOKUP_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "drafters/retrieval/datastore.h"

namespace speclab::retrieval {

struct RestOptions {
  int max_suffix = 16;          // longest context suffix searched
  int min_suffix = 2;           // shortest
  int64_t max_matches = 5000;   // occurrences read (the first in suffix order)
  int continuation_tokens = 10; // tokens taken after each occurrence
};

// Every prefix of the continuations, with how many occurrences it continues.
struct PrefixCounts {
  struct Prefix {
    int parent = -1;  // the prefix one token shorter, or -1 for one token
    int32_t token = 0;
    int depth = 1;
    int64_t count = 0;
  };
  std::vector<Prefix> prefixes;  // parents before children
  int suffix_length = 0;         // the context suffix that matched (0: none)

  // The path of tokens of prefix i.
  std::vector<int32_t> Tokens(int i) const;
};

// The longest suffix of `sequence` that the datastore holds, of max_suffix
// down to min_suffix tokens, and its occurrences: the entries [first, last)
// of the suffix array, at most max_matches of them (the first in suffix
// order). suffix_length 0 where none occurs.
struct SuffixMatch {
  int suffix_length = 0;
  int64_t first = 0, last = 0;
};
SuffixMatch LongestMatch(const Datastore& store, absl::Span<const int32_t> sequence, const RestOptions& options);

// The continuations of LongestMatch()'s occurrences, cut at `max_tokens`
// (and continuation_tokens) and at the datastore's end.
PrefixCounts CountContinuations(const Datastore& store, absl::Span<const int32_t> sequence, const RestOptions& options,
                                int max_tokens);

// The `max_candidates` most frequent prefixes, most frequent first (ties: the
// shorter, then the one seen first). Counts never grow along a path, so the
// set holds every kept prefix's parent, listed before it: inserted in order
// into a trie (the `trie` builder), each adds one node.
std::vector<std::vector<int32_t>> MostFrequentPrefixes(const PrefixCounts& counts, int max_candidates);

// The chain of most frequent next tokens (ties: the one seen first).
std::vector<int32_t> MostFrequentPath(const PrefixCounts& counts);

}  // namespace speclab::retrieval

#endif  // SPECLAB_DRAFTERS_RETRIEVAL_REST_LOOKUP_H_
