#include "drafters/retrieval/rest_lookup.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "drafters/retrieval/suffix_array.h"

namespace speclab::retrieval {

std::vector<int32_t> PrefixCounts::Tokens(int i) const {
  std::vector<int32_t> out;
  for (; i >= 0; i = prefixes[i].parent) out.push_back(prefixes[i].token);
  std::reverse(out.begin(), out.end());
  return out;
}

PrefixCounts CountContinuations(const Datastore& store, absl::Span<const int32_t> sequence, const RestOptions& options,
                                int max_tokens) {
  PrefixCounts out;
  const int64_t n = static_cast<int64_t>(store.tokens.size());
  const int length = std::min(options.continuation_tokens, max_tokens);
  if (length < 1) return out;
  const int longest = static_cast<int>(std::min<int64_t>(options.max_suffix, sequence.size()));
  for (int s = longest; s >= options.min_suffix; --s) {
    auto [first, last] = MatchRange(store.tokens, store.suffixes, sequence.subspan(sequence.size() - s));
    if (first == last) continue;
    out.suffix_length = s;
    std::unordered_map<uint64_t, int> child;  // (parent + 1) << 32 | token -> prefix
    last = std::min(last, first + options.max_matches);
    for (int64_t j = first; j < last; ++j) {
      int parent = -1;
      for (int64_t at = store.suffixes[j] + s; at < std::min(n, store.suffixes[j] + s + length); ++at) {
        const int32_t token = store.tokens[at];
        const uint64_t key = (static_cast<uint64_t>(parent + 1) << 32) | static_cast<uint32_t>(token);
        auto [found, added] = child.try_emplace(key, static_cast<int>(out.prefixes.size()));
        if (added) {
          out.prefixes.push_back(
              {.parent = parent, .token = token, .depth = parent < 0 ? 1 : out.prefixes[parent].depth + 1});
        }
        ++out.prefixes[found->second].count;
        parent = found->second;
      }
    }
    break;
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
  std::vector<int32_t> path;
  int at = -1;
  for (;;) {
    int best = -1;
    for (size_t i = 0; i < counts.prefixes.size(); ++i) {
      if (counts.prefixes[i].parent != at) continue;
      if (best < 0 || counts.prefixes[i].count > counts.prefixes[best].count) best = static_cast<int>(i);
    }
    if (best < 0) return path;
    path.push_back(counts.prefixes[best].token);
    at = best;
  }
}

std::vector<int32_t> ToFixedLength(std::vector<int32_t> path, int length, int32_t last) {
  path.resize(std::min<size_t>(path.size(), std::max(length, 0)));
  while (static_cast<int>(path.size()) < length) path.push_back(path.empty() ? last : path.back());
  return path;
}

}  // namespace speclab::retrieval
