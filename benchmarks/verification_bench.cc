// Micro-benchmarks of verification-side work: every registered verifier on a
// random chain and tree, ancestor-mask construction, and the logits-processor
// chain. Run: build/speclab_bench [--benchmark_filter=REGEX]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <random>

#include "framework/core/random_source.h"
#include "framework/core/verifier_registry.h"
#include "framework/sampling.h"

namespace speclab {
namespace {

// A random tree: `width` children per node for `depth` levels (a chain when width is 1).
TokenTree RandomTree(int width, int depth, int vocab, std::mt19937_64& rng) {
  TokenTree tree(0);
  std::vector<int> frontier{0};
  for (int d = 0; d < depth; ++d) {
    std::vector<int> next;
    for (int node : frontier)
      for (int w = 0; w < width; ++w) next.push_back(tree.AddNode(node, static_cast<int32_t>(rng() % vocab)));
    frontier = next;
  }
  return tree;
}

ProbabilityRows RandomRows(int rows, int vocab, std::mt19937_64& rng) {
  ProbabilityRows out(rows, vocab);
  std::gamma_distribution<double> gamma(0.3, 1.0);  // peaked, like LM rows
  for (int i = 0; i < rows; ++i) {
    double total = 0;
    for (double& x : out.mutable_row(i)) total += (x = gamma(rng) + 1e-12);
    for (double& x : out.mutable_row(i)) x /= total;
  }
  return out;
}

void BM_Verifier(benchmark::State& state, const std::string& name) {
  const int vocab = static_cast<int>(state.range(0));
  const int width = static_cast<int>(state.range(1));
  std::mt19937_64 rng(1);
  Options spec = *Options::FromString("{type: " + name + "}", "bench");
  auto verifier = VerifierRegistry::Create(spec, "verifier");
  const VerifierTraits traits = (*verifier)->traits();
  if (traits.chain_only && width > 1) {
    state.SkipWithError("chain-only verifier");
    return;
  }
  VerificationProblem problem;
  TokenTree tree = RandomTree(width, width == 1 ? 5 : 3, vocab, rng);
  problem.tree = &tree;
  problem.target = RandomRows(tree.size(), vocab, rng);
  // Siblings are drawn from their parent's q row, as tree builders report them.
  const ProbabilityRows parent_q = RandomRows(tree.size(), vocab, rng);
  problem.draft = ProbabilityRows(tree.size(), vocab);
  for (int i = 1; i < tree.size(); ++i) {
    auto from = parent_q.row(tree.parent(i));
    std::copy(from.begin(), from.end(), problem.draft.mutable_row(i).begin());
  }
  for (int i = 0; i < tree.size(); ++i) {
    auto row = problem.target.row(i);
    problem.target_argmax.push_back(static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
  }
  problem.sampling = name == "rrs_wor" ? DraftSampling::kWithoutReplacement
                     : traits.needs_draft_distributions ? DraftSampling::kIndependent
                                                        : DraftSampling::kDeterministic;
  SeededRandomSource random(7);
  for (auto _ : state) {
    auto verdict = (*verifier)->Verify(problem, random);
    if (!verdict.ok()) {
      state.SkipWithError(std::string(verdict.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(verdict->extra_token);
  }
  state.counters["nodes"] = tree.size();
}

void BM_AncestorMask(benchmark::State& state) {
  std::mt19937_64 rng(2);
  const TokenTree tree = RandomTree(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), 1000, rng);
  for (auto _ : state) benchmark::DoNotOptimize(tree.AncestorMask());
  state.counters["nodes"] = tree.size();
}
BENCHMARK(BM_AncestorMask)->Args({1, 8})->Args({2, 5})->Args({4, 3})->Args({8, 2});

void BM_Probabilities(benchmark::State& state) {
  at::Tensor logits = at::randn({state.range(0), state.range(1)});
  const SamplingParams params{.temperature = 0.8, .top_k = state.range(2), .top_p = 0.95};
  for (auto _ : state) benchmark::DoNotOptimize(Probabilities(logits, params));
}
BENCHMARK(BM_Probabilities)->Args({8, 8000, 0})->Args({8, 8000, 50})->Args({64, 32000, 50});

}  // namespace

// Registered from main: plugins register during static initialisation, whose
// order across translation units is unspecified.
void RegisterVerifierBenchmarks() {
  for (const auto* entry : VerifierRegistry::List()) {
    for (int width : {1, 2})
      benchmark::RegisterBenchmark(("BM_Verifier/" + entry->name).c_str(), BM_Verifier, entry->name)
          ->Args({8000, width});
  }
}

}  // namespace speclab

int main(int argc, char** argv) {
  at::set_num_threads(1);
  speclab::RegisterVerifierBenchmarks();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
