// Batch-1 forward cost of the shipped models: one decoding step (1 token on
// a 128-token KV prefix) and a 16-node tree. The target/drafter ratio is the
// `c` of Leviathan's speedup model (docs/algorithms.md §5.3).
// Run: build/speclab_bench --benchmark_filter=ModelForward
//      SPECLAB_BENCH_DEVICE=cuda build/speclab_bench --benchmark_filter=ModelForward
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <string>

#include "benchmarks/graph_bench.h"
#include "framework/model/llama_model.h"

namespace speclab {
namespace {

void BM_ModelForward(benchmark::State& state, const std::string& dir) {
  const c10::Device device = BenchDevice();
  auto model = LlamaModel::Load(std::string(SPECLAB_SOURCE_DIR) + "/" + dir, device,
                                device.is_cuda() ? at::kBFloat16 : at::kFloat, 512);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  c10::InferenceMode guard;
  const int64_t prefix = 128, n = state.range(0);
  auto options = at::TensorOptions().dtype(at::kLong).device(device);
  std::vector<int64_t> all(prefix);
  for (int64_t i = 0; i < prefix; ++i) all[i] = i;
  (void)(*model)->Forward(at::randint(3, 8000, {prefix}, options), at::arange(prefix, options),
                          at::ones({prefix, prefix}, at::TensorOptions().dtype(at::kBool).device(device)).tril());
  (void)(*model)->Commit(all);
  const at::Tensor tokens = at::randint(3, 8000, {n}, options);
  const at::Tensor positions = at::arange(prefix, prefix + n, options);
  const at::Tensor mask = at::ones({n, n}, at::TensorOptions().dtype(at::kBool).device(device)).tril();
  for (auto _ : state) {
    auto logits = (*model)->Forward(tokens, positions, mask);
    benchmark::DoNotOptimize(logits->data_ptr());
    if (device.is_cuda()) torch::cuda::synchronize();
    (void)(*model)->Truncate(prefix);
  }
}
BENCHMARK_CAPTURE(BM_ModelForward, target, std::string("models/speclab-target"))->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ModelForward, drafter, std::string("models/speclab-drafter"))->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace speclab
