#include "drafters/retrieval/rest_lookup.h"

#include <algorithm>
#include <numeric>

#include "drafters/retrieval/suffix_array.h"

namespace speclab::retrieval {

std::vector<int32_t> PrefixCounts::Tokens(int i) const {
  std::vector<int32_t> out;
  for (; i >= 0; i = prefixes[i].parent) out.push_back(prefixes[i].token);
  std::reverse(out.begin(), out.end());
  return out;
}

SuffixMatch LongestMatch(const Datastore& store, absl::Span<const int32_t> sequence, const RestOptions& options) {
  const int longest = static_cast<int>(std::min<int64_t>(options.max_suffix, sequence.size()));
  for (int s = longest; s >= options.min_suffix; --s) {
    const auto [first, last] = MatchRange(store.tokens, store.suffixes, sequence.subspan(sequence.size() - s));
    if (first < last) return {.suffix_length = s, .first = first, .last = std::min(last, first + options.max_matches)};
  }
  return {};
}

PrefixCounts CountContinuations(const Datastore& store, absl::Span<const int32_t> sequence, const RestOptions& options,
                                int max_tokens) {
  PrefixCounts out;
  const int64_t n = static_cast<int64_t>(store.tokens.size());
  const int length = std::min(options.continuation_tokens, max_tokens);
  if (length < 1) return out;
  const SuffixMatch match = LongestMatch(store, sequence, options);
  out.suffix_length = match.suffix_length;
  if (match.suffix_length == 0) return out;
  // The matches' continuations, gathered first (independent reads of the
  // datastore) and cut at its end.
  const int64_t matches = match.last - match.first;
  std::vector<int32_t> next(matches * length);
  std::vector<int> reach(matches);
  for (int64_t j = 0; j < matches; ++j) {
    const int64_t from = store.suffixes[match.first + j] + match.suffix_length;
    reach[j] = static_cast<int>(std::clamp<int64_t>(n - from, 0, length));
    std::copy_n(store.tokens.begin() + from, reach[j], next.begin() + j * length);
  }
  // In suffix order the matches sharing a prefix of their continuations are
  // adjacent: a match starts a new prefix at every depth past what it shares
  // with the match before it, and each prefix counts the matches until the
  // next one that shares less. Prefixes are listed as a trie inserting the
  // matches in order would create them (match by match, shallow first).
  std::vector<int> open(length, -1);  // the prefix each depth is counting
  for (int64_t j = 0; j < matches; ++j) {
    int shared = 0;
    if (j > 0) {
      const int both = std::min(reach[j], reach[j - 1]);
      while (shared < both && next[j * length + shared] == next[(j - 1) * length + shared]) ++shared;
    }
    for (int d = 0; d < reach[j]; ++d) {
      if (d >= shared) {
        open[d] = static_cast<int>(out.prefixes.size());
        out.prefixes.push_back({.parent = d == 0 ? -1 : open[d - 1], .token = next[j * length + d], .depth = d + 1});
      }
      ++out.prefixes[open[d]].count;
    }
  }
  return out;
}

std::vector<std::vector<int32_t>> MostFrequentPrefixes(const PrefixCounts& counts, int max_candidates) {
  std::vector<int> order(counts.prefixes.size());
  std::iota(order.begin(), order.end(), 0);
  const auto& p = counts.prefixes;
  const size_t kept = std::min<size_t>(std::max(max_candidates, 0), order.size());
  std::partial_sort(order.begin(), order.begin() + kept, order.end(), [&](int a, int b) {
    if (p[a].count != p[b].count) return p[a].count > p[b].count;
    if (p[a].depth != p[b].depth) return p[a].depth < p[b].depth;
    return a < b;
  });
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < kept; ++i) out.push_back(counts.Tokens(order[i]));
  return out;
}

std::vector<int32_t> MostFrequentPath(const PrefixCounts& counts) {
  const auto& p = counts.prefixes;
  std::vector<int> best(p.size() + 1, -1);  // each prefix's most frequent child (ties: the first), by parent + 1
  for (size_t i = 0; i < p.size(); ++i) {
    int& child = best[p[i].parent + 1];
    if (child < 0 || p[i].count > p[child].count) child = static_cast<int>(i);
  }
  std::vector<int32_t> path;
  for (int at = best[0]; at >= 0; at = best[at + 1]) path.push_back(p[at].token);
  return path;
}

}  // namespace speclab::retrieval
