// CudaGraph: GPU work captured once and replayed with a single launch.
//
// A batch-1 decoding forward of a small model is hundreds of tiny kernels;
// launched one by one from the host they cost more than the arithmetic.
// Captured into a graph, they replay for the host cost of one launch. The
// captured work reads and writes fixed buffers: callers fill the inputs in
// place before Replay() and copy the outputs out after it.
#ifndef SPECLAB_FRAMEWORK_MODEL_CUDA_GRAPH_H_
#define SPECLAB_FRAMEWORK_MODEL_CUDA_GRAPH_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab {

class CudaGraph {
 public:
  // True when this build has CUDA support (the graph API links).
  static bool Supported();

  // Runs `work` once eagerly on a side stream (lazy initialisation such as
  // cuBLAS workspaces must not happen during capture), then captures a second
  // run of it. Graphs created with the same `pool_owner` share one memory pool:
  // replay them one at a time, on one stream, and keep their outputs alive.
  // `work` must not synchronise with the host.
  static absl::StatusOr<std::unique_ptr<CudaGraph>> Capture(c10::Device device, const CudaGraph* pool_owner,
                                                            const std::function<void()>& work);

  // Inside Capture's `work`: what `work` enqueues from here to EndIf() runs,
  // in each replay, only where `predicate` ([1] bool on the device) holds
  // when the replay reaches this point (a conditional node). Everywhere else
  // (the eager warm-up run, the CPU, CUDA before 12.4)
  // that work always runs, so it must leave the same results where the
  // predicate is false. The work inside draws no random numbers. True where
  // the work was made conditional; pass the result to EndIf(). Conditional
  // work may begin more (nested: end the innermost first); a replay then
  // meets one false condition where a chain of them stops, where sequential
  // ones would each be met (an IF node costs several microseconds).
  static bool BeginIf(const at::Tensor& predicate);
  static void EndIf(bool began);
  // EndIf for each of `began` (nested conditional work's results, the
  // outermost first), the innermost first.
  static void EndNested(const std::vector<bool>& began);

  // BeginIf in two parts, for work that computes its own predicate in a
  // kernel that it launches anyway (fused::AdvanceStop): a new condition of
  // the graph being captured, nullopt where BeginIf would return false; a
  // kernel captured after it sets it in every replay
  // (cudaGraphSetConditional); then BeginIfSet(condition) begins the work
  // that runs only where it was set nonzero (through EndIf, as BeginIf).
  static std::optional<uint64_t> NewCondition();
  static bool BeginIfSet(std::optional<uint64_t> condition);

  virtual ~CudaGraph() = default;
  // Enqueues the captured work on the current stream of the capture device.
  virtual void Replay() = 0;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_GRAPH_H_
