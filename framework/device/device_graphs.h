// DeviceGraphs: a device form's own work, captured into CUDA graphs.
//
// A model's forwards run as CUDA graphs inside the model (LlamaModel). A
// device form whose work lies outside any model's forward (Medusa's heads
// and the builder's picks, an n-gram kernel and its continuation) is just as
// launch-bound: tens of small kernels a step, each costing the host more than
// the device. A drafter holds a DeviceGraphs and runs that work through
// Run(): on CUDA the first call with a key captures the work on copies of
// its inputs, and every later call copies the inputs in, replays the graph
// with one launch and copies the outputs out; elsewhere the work runs as it
// is. Each run is counted, so that drafting can be priced like forwards. The work must be device work only, the same ops on the same shapes
// every time: no host reads, no RNG (draw noise before, as ChainNoise() and
// LevelNoise() do, and pass it as an input).
#ifndef SPECLAB_FRAMEWORK_DEVICE_DEVICE_GRAPHS_H_
#define SPECLAB_FRAMEWORK_DEVICE_DEVICE_GRAPHS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/device/pick_key.h"

namespace speclab {

class CudaGraph;

// What captured work gives back: its tensors (undefined ones allowed) and a
// host-side layout the caller reads them by (e.g. how many belong to each
// level), fixed at capture.
struct DeviceOutputs {
  std::vector<at::Tensor> tensors;
  std::vector<int64_t> layout;
};

// Levels of tensors (a tree's levels, ForwardLevels' LevelsKept) as one
// DeviceOutputs, the layout holding each level's count, and back.
DeviceOutputs LevelsAsOutputs(const std::vector<std::vector<at::Tensor>>& levels);
std::vector<std::vector<at::Tensor>> LevelsFromOutputs(const DeviceOutputs& outputs);

class DeviceGraphs {
 public:
  using Work = std::function<absl::StatusOr<DeviceOutputs>(const std::vector<at::Tensor>& inputs)>;

  DeviceGraphs();
  ~DeviceGraphs();
  DeviceGraphs(DeviceGraphs&&) noexcept;
  DeviceGraphs& operator=(DeviceGraphs&&) noexcept;

  // Runs `work` on `inputs` (defined tensors on one device). The graph is
  // keyed by `parts` (everything the work depends on besides the inputs and
  // the owner's fixed state: picks, lengths; as a pick's parameters are,
  // pick_key.h) and the inputs' shapes and types, so that the owner never
  // writes a key. The outputs are copies, the caller's to keep.
  template <typename... Parts>
  absl::StatusOr<DeviceOutputs> Run(const std::tuple<Parts...>& parts, const std::vector<at::Tensor>& inputs,
                                    const Work& work) {
    return RunKeyed(PickKeyParts(parts), inputs, work);
  }

  // Graphs captured so far.
  int64_t captures() const { return captures_; }

  // What drafting cost, for predicted times (experiments/forward_costs.h):
  // runs of each work since ResetRuns(), by a key naming the work and its
  // inputs' shapes, and the seconds one run of it takes the device: its
  // graph replayed on its last inputs, on the device's clock
  // (device_timer.h; the median of five windows of `repeats` replays); off
  // CUDA, the mean wall time of its runs so far. NotFound for a key never run.
  const std::map<std::string, int64_t>& runs() const { return runs_; }
  void ResetRuns() { runs_.clear(); }
  absl::StatusOr<double> SecondsPerRun(const std::string& key, int repeats);

 private:
  struct Captured;
  struct Timed {  // runs without a graph: their wall time
    double seconds = 0;
    int64_t runs = 0;
  };
  absl::StatusOr<DeviceOutputs> RunKeyed(const std::string& parts_key, const std::vector<at::Tensor>& inputs,
                                         const Work& work);

  std::map<std::string, std::unique_ptr<Captured>> graphs_;
  std::map<std::string, int64_t> runs_;
  std::map<std::string, Timed> timed_;
  int64_t captures_ = 0;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_GRAPHS_H_
