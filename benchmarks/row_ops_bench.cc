// fused::TopKLogSoftmax (the tree builders' top-k by log q: dynamic_topk's
// k = 4, best_first's 16) against the ATen formula it replaces, on the
// shipped vocabulary (8000) and Llama 3's (128256), for one row (a root)
// and for 4 and 15 (a level's frontier).
//
// Each iteration replays a CUDA graph of 16 calls on distinct rows, then
// synchronises; real time per iteration / 16 is one call (counter us/call).
// Run: SPECLAB_BENCH_DEVICE=cuda build/speclab_bench --benchmark_filter=TopKLogSoftmax
// (CUDA only: on the CPU both sides are the same ATen formula.)
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <vector>

#include "benchmarks/graph_bench.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"

namespace speclab {
namespace {

constexpr int64_t kCalls = 16;

// state.range(0) = rows, state.range(1) = vocabulary, state.range(2) = k.
void BM_TopKLogSoftmax(benchmark::State& state, bool fused) {
  if (!BenchDevice().is_cuda() || !CudaGraph::Supported()) {
    state.SkipWithError("CUDA only: set SPECLAB_BENCH_DEVICE=cuda on a CUDA build");
    return;
  }
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA, 0);
  const int64_t rows = state.range(0), vocab = state.range(1), k = state.range(2);
  std::vector<at::Tensor> logits;
  for (int64_t i = 0; i < kCalls; ++i)
    logits.push_back(at::randn({rows, vocab}, at::TensorOptions().device(device)) * 3);
  fused::SetCudaKernelsEnabled(fused);
  const bool timed = TimeGraphReplays(state, device, [&] {
    for (const at::Tensor& x : logits) benchmark::DoNotOptimize(fused::TopKLogSoftmax(x, k));
  });
  fused::SetCudaKernelsEnabled(true);
  if (!timed) return;
  state.counters["us/call"] = benchmark::Counter(static_cast<double>(kCalls) * 1e-6,
                                                 benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

void TopKArgs(benchmark::internal::Benchmark* b) {
  for (int64_t vocab : {8000, 128256}) {
    for (int64_t rows : {1, 4, 15}) {
      for (int64_t k : {4, 16}) b->Args({rows, vocab, k});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_TopKLogSoftmax, aten, false)->Apply(TopKArgs);
BENCHMARK_CAPTURE(BM_TopKLogSoftmax, fused, true)->Apply(TopKArgs);

}  // namespace
}  // namespace speclab
