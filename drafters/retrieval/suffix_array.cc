#include "drafters/retrieval/suffix_array.h"

#include <algorithm>
#include <numeric>

namespace speclab::retrieval {

std::vector<int64_t> BuildSuffixArray(absl::Span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> suffixes(n), rank(n), next(n);
  std::iota(suffixes.begin(), suffixes.end(), 0);
  for (int64_t i = 0; i < n; ++i) rank[i] = tokens[i];
  // Round k sorts by the first 2k tokens: (rank of the first k, rank of the
  // next k, or -1 past the end, so that a suffix precedes its extensions).
  for (int64_t k = 1;; k *= 2) {
    auto key = [&](int64_t i) { return std::make_pair(rank[i], i + k < n ? rank[i + k] : int64_t{-1}); };
    std::sort(suffixes.begin(), suffixes.end(), [&](int64_t a, int64_t b) { return key(a) < key(b); });
    if (n == 0) break;
    next[suffixes[0]] = 0;
    for (int64_t j = 1; j < n; ++j)
      next[suffixes[j]] = next[suffixes[j - 1]] + (key(suffixes[j - 1]) < key(suffixes[j]) ? 1 : 0);
    rank.swap(next);
    if (rank[suffixes[n - 1]] == n - 1 || k >= n) break;  // all distinct
  }
  return suffixes;
}

namespace {

// The suffix at `start` against `query`, on the query's length only: < 0, 0
// (the suffix starts with the query) or > 0.
int CompareToQuery(absl::Span<const int32_t> tokens, int64_t start, absl::Span<const int32_t> query) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (size_t i = 0; i < query.size(); ++i) {
    if (start + static_cast<int64_t>(i) >= n) return -1;  // a proper prefix of the query sorts before it
    const int32_t t = tokens[start + i];
    if (t != query[i]) return t < query[i] ? -1 : 1;
  }
  return 0;
}

}  // namespace

std::pair<int64_t, int64_t> MatchRange(absl::Span<const int32_t> tokens, absl::Span<const int64_t> suffixes,
                                       absl::Span<const int32_t> query) {
  auto first = std::partition_point(suffixes.begin(), suffixes.end(),
                                    [&](int64_t s) { return CompareToQuery(tokens, s, query) < 0; });
  auto last = std::partition_point(first, suffixes.end(),
                                   [&](int64_t s) { return CompareToQuery(tokens, s, query) == 0; });
  return {first - suffixes.begin(), last - suffixes.begin()};
}

}  // namespace speclab::retrieval
