// What the CUDA micro-benchmarks share: the device they run on, and timing a
// captured graph of the work under test (one replay and a synchronisation per
// iteration, so host launch costs stay out of the numbers).
#ifndef SPECLAB_BENCHMARKS_GRAPH_BENCH_H_
#define SPECLAB_BENCHMARKS_GRAPH_BENCH_H_

#include <benchmark/benchmark.h>
#include <c10/core/Device.h>

#include <functional>

namespace speclab {

// cuda:0 with SPECLAB_BENCH_DEVICE=cuda, else the CPU.
c10::Device BenchDevice();

// Captures `work` on `device` into a CUDA graph, replays it once, then times
// one replay plus a synchronisation per iteration. Where the capture fails,
// marks the benchmark skipped with the reason and returns false.
bool TimeGraphReplays(benchmark::State& state, c10::Device device, const std::function<void()>& work);

}  // namespace speclab

#endif  // SPECLAB_BENCHMARKS_GRAPH_BENCH_H_
