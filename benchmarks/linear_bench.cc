// fused::Linear (the decode GEMV kernel) against at::linear (cuBLAS) on the
// Llama 3 projection shapes, bf16, at m = 1 (a decoding step) and m = 16 (a
// tree). A linear layer at these m streams its weight matrix once, so the
// figure of merit is the weight bytes moved per second (counter weight_B/s),
// to be read against the device's copy bandwidth.
//
// Each iteration replays a CUDA graph of `calls` launches (as decoding does),
// rotating over enough weight buffers that L2 cannot hold them, then
// synchronises; real time per iteration / calls is one call.
// Run: SPECLAB_BENCH_DEVICE=cuda build/speclab_bench --benchmark_filter=Linear
// (CUDA only: on the CPU both sides are the same at::linear.)
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <string>
#include <vector>

#include "benchmarks/graph_bench.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"

namespace speclab {
namespace {

void BM_Linear(benchmark::State& state, bool fused, int64_t n, int64_t k) {
  if (!BenchDevice().is_cuda() || !CudaGraph::Supported()) {
    state.SkipWithError("CUDA only: set SPECLAB_BENCH_DEVICE=cuda on a CUDA build");
    return;
  }
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA, 0);
  const auto options = at::TensorOptions().dtype(at::kBFloat16).device(device);
  const int64_t m = state.range(0);
  const int64_t bytes = n * k * 2;
  // >= 512 MB of weights in rotation (L2 is 50-60 MB), and >= 2 GB per replay
  // up to 64 calls, so that the replay's launch and sync stay small.
  const int64_t buffers = std::min<int64_t>(64, std::max<int64_t>(2, ((int64_t{512} << 20) + bytes - 1) / bytes));
  const int64_t calls = std::max(buffers, std::min<int64_t>(64, (int64_t{2} << 30) / bytes));
  std::vector<at::Tensor> weights;
  for (int64_t i = 0; i < buffers; ++i) weights.push_back(at::randn({n, k}, options));
  const at::Tensor x = at::randn({m, k}, options);
  if (!TimeGraphReplays(state, device, [&] {
    for (int64_t i = 0; i < calls; ++i) {
      const at::Tensor& w = weights[i % buffers];
      benchmark::DoNotOptimize(fused ? fused::Linear(x, w, at::Tensor()) : at::linear(x, w));
    }
  })) {
    return;
  }
  // Weight bytes per second (printed with SI prefixes: 3.0T = 3.0 TB/s) and
  // microseconds per call.
  state.counters["weight_B/s"] =
      benchmark::Counter(static_cast<double>(bytes * calls), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["us/call"] = benchmark::Counter(static_cast<double>(calls) * 1e-6,
                                                 benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

#define SPECLAB_LINEAR_BENCH(label, n, k)                                                                    \
  BENCHMARK_CAPTURE(BM_Linear, label##_aten, false, n, k)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMicrosecond); \
  BENCHMARK_CAPTURE(BM_Linear, label##_fused, true, n, k)->Arg(1)->Arg(16)->UseRealTime()->Unit(benchmark::kMicrosecond)

SPECLAB_LINEAR_BENCH(llama8b_qkv, 6144, 4096);
SPECLAB_LINEAR_BENCH(llama8b_o, 4096, 4096);
SPECLAB_LINEAR_BENCH(llama8b_gate_up, 28672, 4096);
SPECLAB_LINEAR_BENCH(llama8b_down, 4096, 14336);
SPECLAB_LINEAR_BENCH(llama8b_lm_head, 128256, 4096);
SPECLAB_LINEAR_BENCH(llama1b_qkv, 3072, 2048);
SPECLAB_LINEAR_BENCH(llama1b_o, 2048, 2048);
SPECLAB_LINEAR_BENCH(llama1b_gate_up, 16384, 2048);
SPECLAB_LINEAR_BENCH(llama1b_down, 2048, 8192);
SPECLAB_LINEAR_BENCH(llama1b_lm_head, 128256, 2048);

}  // namespace
}  // namespace speclab
