// fused::DecodeAttention (the flash-decoding kernel) against the ATen path it
// replaces (allowed.repeat + at::scaled_dot_product_attention, as Attend() in
// llama_model.cc runs it) on the Llama 3 8B (kv_heads 8, group 4, D 128) and
// 1B (D 64) attention shapes, bf16, n query tokens against a KV bucket of L
// slots where every slot is visible to some token (a causal chain ending at L).
//
// Each iteration replays a CUDA graph of 32 calls, one per layer cache (32
// distinct [8, 8320, D] caches, as a decoding step walks its layers), then
// synchronises; real time per iteration / 32 is one call (counter us/call).
// Run: SPECLAB_BENCH_DEVICE=cuda build/speclab_bench --benchmark_filter=DecodeAttention
// (CUDA only: on the CPU both sides are the same ATen formula.)
// build-fusedcheck/attn_bench.cc is the scratch version with chunking sweeps.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <string>
#include <vector>

#include "benchmarks/graph_bench.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"

namespace speclab {
namespace {

constexpr int64_t kBenchLayers = 32;
constexpr int64_t kBenchSlots = 8192 + 128;

// state.range(0) = n query tokens, state.range(1) = L.
void BM_DecodeAttention(benchmark::State& state, bool fused, int64_t head_dim) {
  if (!BenchDevice().is_cuda() || !CudaGraph::Supported()) {
    state.SkipWithError("CUDA only: set SPECLAB_BENCH_DEVICE=cuda on a CUDA build");
    return;
  }
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA, 0);
  const auto options = at::TensorOptions().dtype(at::kBFloat16).device(device);
  const int64_t kv_heads = 8, group = 4;
  const int64_t n = state.range(0), length = state.range(1);
  std::vector<at::Tensor> k, v;
  for (int64_t i = 0; i < kBenchLayers; ++i) {
    k.push_back(at::randn({kv_heads, kBenchSlots, head_dim}, options));
    v.push_back(at::randn({kv_heads, kBenchSlots, head_dim}, options));
  }
  const at::Tensor q = at::randn({kv_heads, group * n, head_dim}, options);
  // The model's layout: a narrow() view of a [128, slots] buffer.
  const at::Tensor buffer = at::zeros({128, kBenchSlots}, options.dtype(at::kBool));
  const at::Tensor allowed = buffer.narrow(0, 0, n).narrow(1, 0, length);
  const at::Tensor cols = at::arange(length, options.dtype(at::kLong));
  allowed.copy_(cols.unsqueeze(0).le((at::arange(n, cols.options()) + (length - n)).unsqueeze(1)));
  fused::SetCudaKernelsEnabled(fused);
  const bool timed = TimeGraphReplays(state, device, [&] {
    for (int64_t i = 0; i < kBenchLayers; ++i) {
      benchmark::DoNotOptimize(fused::DecodeAttention(q, k[i], v[i], allowed, length));
    }
  });
  fused::SetCudaKernelsEnabled(true);
  if (!timed) return;
  state.counters["us/call"] =
      benchmark::Counter(static_cast<double>(kBenchLayers) * 1e-6,
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void AttentionArgs(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1, 4, 16}) {
    for (int64_t length : {256, 1024, 4096}) b->Args({n, length});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_DecodeAttention, llama8b_aten, false, 128)->Apply(AttentionArgs);
BENCHMARK_CAPTURE(BM_DecodeAttention, llama8b_fused, true, 128)->Apply(AttentionArgs);
BENCHMARK_CAPTURE(BM_DecodeAttention, llama1b_aten, false, 64)->Apply(AttentionArgs);
BENCHMARK_CAPTURE(BM_DecodeAttention, llama1b_fused, true, 64)->Apply(AttentionArgs);

}  // namespace
}  // namespace speclab
