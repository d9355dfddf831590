// SuffixDecoding's speculation (drafters/suffix_tree/suffix_trie.h) on the
// host, per step, from the trie of a generation of state.range(0) tokens
// (max_depth 64, as the suffix_tree drafter's default): a chain, as the
// `chain` builder asks, and a tree of 16 tokens. The text repeats stretches
// of itself over a vocabulary of 8000 ids, as code and structured text do.
// Run: build/speclab_bench --benchmark_filter='SuffixTrie|EarlierTrie'
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "drafters/suffix_tree/suffix_trie.h"

namespace speclab::suffix_decoding {
namespace {

std::vector<int32_t> RepetitiveText(size_t n) {
  std::mt19937_64 rng(5);
  std::vector<int32_t> text;
  while (text.size() < n) {
    if (text.size() > 50 && rng() % 3 == 0) {  // a stretch copied from earlier
      const size_t from = rng() % (text.size() - 20), length = 4 + rng() % 16;
      for (size_t k = 0; k < length && text.size() < n; ++k) text.push_back(text[from + k]);
    } else {
      text.push_back(static_cast<int32_t>((rng() % 60) * (rng() % 130) % 8000));
    }
  }
  return text;
}

void BM_SuffixTrieSpeculate(benchmark::State& state, bool tree) {
  const std::vector<int32_t> text = RepetitiveText(static_cast<size_t>(state.range(0)));
  SuffixTrie trie(64);
  trie.Extend(text);
  SpeculationLimits limits;
  limits.tree = tree;
  limits.max_tokens = tree ? 16 : 6;
  limits.max_path = 6;
  for (auto _ : state) benchmark::DoNotOptimize(trie.Speculate(text, limits));
}
BENCHMARK_CAPTURE(BM_SuffixTrieSpeculate, chain, false)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SuffixTrieSpeculate, tree, true)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);

// The earlier generations' trie (16 outputs of 512 tokens, every one ended)
// asked at the end of a generation that repeats a stretch of one: walking
// from the root for each match length, or with a cursor advanced over the
// generation (SuffixCursor), as suffix_tree and hierarchy ask it.
void BM_EarlierTrieSpeculate(benchmark::State& state, bool with_cursor) {
  const std::vector<int32_t> text = RepetitiveText(16 * 512 + 256);
  SuffixTrie earlier(64);
  for (size_t start = 0; start < 16 * 512; start += 512) {
    earlier.Extend(absl::MakeConstSpan(text).subspan(start, 512));
    earlier.EndSequence();
  }
  // A generation of new text that ends by repeating 48 tokens of the fourth output.
  std::vector<int32_t> generation(text.begin() + 16 * 512, text.end());
  generation.insert(generation.end(), text.begin() + 3 * 512 + 100, text.begin() + 3 * 512 + 148);
  SuffixCursor cursor;
  cursor.Advance(earlier, generation);
  SpeculationLimits limits;
  limits.max_tokens = 16;
  limits.max_path = 6;
  for (auto _ : state)
    benchmark::DoNotOptimize(earlier.Speculate(generation, limits, with_cursor ? &cursor : nullptr));
}
BENCHMARK_CAPTURE(BM_EarlierTrieSpeculate, walks, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_EarlierTrieSpeculate, cursor, true)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace speclab::suffix_decoding
