#include "benchmarks/graph_bench.h"

#include <torch/cuda.h>

#include <cstdlib>
#include <string>

#include "framework/model/cuda_graph.h"

namespace speclab {

c10::Device BenchDevice() {
  const char* name = std::getenv("SPECLAB_BENCH_DEVICE");
  return name != nullptr && std::string(name) == "cuda" ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
}

bool TimeGraphReplays(benchmark::State& state, c10::Device device, const std::function<void()>& work) {
  auto graph = CudaGraph::Capture(device, nullptr, work);
  if (!graph.ok()) {
    state.SkipWithError(std::string(graph.status().message()).c_str());
    return false;
  }
  (*graph)->Replay();
  torch::cuda::synchronize();
  for (auto _ : state) {
    (*graph)->Replay();
    torch::cuda::synchronize();
  }
  return true;
}

}  // namespace speclab
