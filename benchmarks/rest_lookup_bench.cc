// REST's host lookup (drafters/retrieval/rest_lookup.h): the count over the
// continuations' prefixes and the tree or chain taken from it, per step, on a
// datastore (SPECLAB_BENCH_DATASTORE=FILE.splds, else a synthetic store of 2M
// tokens over 8000 ids whose text repeats stretches of itself).
//
// Queries end in a piece of the store: state.range(0) tokens copied from it
// (16: long matches, few occurrences; 2: short ones, thousands), after noise.
// Run: build/speclab_bench --benchmark_filter=Rest
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "drafters/retrieval/datastore.h"
#include "drafters/retrieval/rest_lookup.h"

namespace speclab::retrieval {
namespace {

const Datastore& BenchStore() {
  static const Datastore* store = [] {
    if (const char* file = std::getenv("SPECLAB_BENCH_DATASTORE")) {
      auto read = ReadDatastore(file);
      if (read.ok()) return new Datastore(*std::move(read));
    }
    std::mt19937_64 rng(7);
    std::vector<int32_t> tokens(2'000'000);
    for (size_t i = 0; i < tokens.size(); ++i) {
      // Zipf-like ids, and stretches copied from earlier text.
      tokens[i] = static_cast<int32_t>(std::min<uint64_t>(7999, (rng() % 90) * (rng() % 90) / 1));
      if (i > 1000 && rng() % 50 == 0) {
        const size_t from = rng() % (i - 100), length = 5 + rng() % 40;
        for (size_t k = 0; k < length && i < tokens.size(); ++k, ++i) tokens[i] = tokens[from + k];
      }
    }
    return new Datastore(*Datastore::Build(std::move(tokens), 8000));
  }();
  return *store;
}

std::vector<std::vector<int32_t>> Queries(const Datastore& store, int copied) {
  std::mt19937_64 rng(11);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 64; ++i) {
    std::vector<int32_t> query;
    for (int k = 0; k < 40 - copied; ++k) query.push_back(static_cast<int32_t>(rng() % 8000));
    const size_t from = rng() % (store.tokens.size() - copied);
    query.insert(query.end(), store.tokens.begin() + from, store.tokens.begin() + from + copied);
    out.push_back(std::move(query));
  }
  return out;
}

void BM_RestTree(benchmark::State& state) {
  const Datastore& store = BenchStore();
  const auto queries = Queries(store, static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    const PrefixCounts counts = CountContinuations(store, queries[i++ % queries.size()], RestOptions{}, 10);
    benchmark::DoNotOptimize(MostFrequentPrefixes(counts, 16));
  }
}
BENCHMARK(BM_RestTree)->Arg(16)->Arg(2)->Unit(benchmark::kMicrosecond);

void BM_RestChain(benchmark::State& state) {
  const Datastore& store = BenchStore();
  const auto queries = Queries(store, static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    const PrefixCounts counts = CountContinuations(store, queries[i++ % queries.size()], RestOptions{}, 6);
    benchmark::DoNotOptimize(MostFrequentPath(counts));
  }
}
BENCHMARK(BM_RestChain)->Arg(16)->Arg(2)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace speclab::retrieval
