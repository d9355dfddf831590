#include "framework/device/device_graphs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_timer.h"
#include "framework/error_text.h"
#include "framework/model/cuda_graph.h"

namespace speclab {

DeviceOutputs LevelsAsOutputs(const std::vector<std::vector<at::Tensor>>& levels) {
  DeviceOutputs flat;
  for (const std::vector<at::Tensor>& level : levels) {
    flat.layout.push_back(static_cast<int64_t>(level.size()));
    flat.tensors.insert(flat.tensors.end(), level.begin(), level.end());
  }
  return flat;
}

std::vector<std::vector<at::Tensor>> LevelsFromOutputs(const DeviceOutputs& outputs) {
  std::vector<std::vector<at::Tensor>> levels;
  auto next = outputs.tensors.begin();
  for (int64_t count : outputs.layout) {
    levels.emplace_back(next, next + count);
    next += count;
  }
  return levels;
}

struct DeviceGraphs::Captured {
  std::vector<at::Tensor> inputs;  // the graph's input buffers
  DeviceOutputs outputs;           // its output buffers, and their layout
  std::unique_ptr<CudaGraph> graph;
};

DeviceGraphs::DeviceGraphs() = default;
DeviceGraphs::~DeviceGraphs() = default;
DeviceGraphs::DeviceGraphs(DeviceGraphs&&) noexcept = default;
DeviceGraphs& DeviceGraphs::operator=(DeviceGraphs&&) noexcept = default;

namespace {

std::string InputsKey(const std::vector<at::Tensor>& inputs) {
  std::vector<std::string> parts;
  for (const at::Tensor& t : inputs)
    parts.push_back(absl::StrCat("[", absl::StrJoin(t.sizes(), ","), "]", c10::toString(t.scalar_type())));
  return absl::StrJoin(parts, ";");
}

DeviceOutputs Copies(const DeviceOutputs& outputs) {
  DeviceOutputs out{.layout = outputs.layout};
  for (const at::Tensor& t : outputs.tensors) out.tensors.push_back(t.defined() ? t.clone() : at::Tensor());
  return out;
}

}  // namespace

absl::StatusOr<DeviceOutputs> DeviceGraphs::RunKeyed(const std::string& parts_key,
                                                     const std::vector<at::Tensor>& inputs, const Work& work) {
  for (const at::Tensor& t : inputs)
    if (!t.defined() || t.device() != inputs.front().device())
      return absl::InvalidArgumentError("DeviceGraphs: every input must be a defined tensor on one device");
  const std::string key = absl::StrCat(parts_key, "|", InputsKey(inputs));
  if (inputs.empty() || !inputs.front().is_cuda() || !CudaGraph::Supported()) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<DeviceOutputs> out = work(inputs);
    if (!out.ok()) return out;
    Timed& timed = timed_[key];
    timed.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++timed.runs;
    ++runs_[key];
    return out;
  }
  try {
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      auto captured = std::make_unique<Captured>();
      for (const at::Tensor& t : inputs) captured->inputs.push_back(t.clone());
      absl::Status failed = absl::OkStatus();
      const CudaGraph* pool_owner = graphs_.empty() ? nullptr : graphs_.begin()->second->graph.get();
      absl::StatusOr<std::unique_ptr<CudaGraph>> graph =
          CudaGraph::Capture(inputs.front().device(), pool_owner, [&] {
            absl::StatusOr<DeviceOutputs> out = work(captured->inputs);
            if (out.ok()) {
              captured->outputs = *std::move(out);
            } else {
              failed = out.status();
            }
          });
      RETURN_IF_ERROR(failed);  // the work's own error first
      if (!graph.ok()) return graph.status();
      captured->graph = *std::move(graph);
      ++captures_;
      it = graphs_.emplace(key, std::move(captured)).first;
    } else {
      for (size_t i = 0; i < inputs.size(); ++i) it->second->inputs[i].copy_(inputs[i], /*non_blocking=*/true);
    }
    it->second->graph->Replay();
    ++runs_[key];
    return Copies(it->second->outputs);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("DeviceGraphs: ", ErrorText(e)));
  }
}

absl::StatusOr<double> DeviceGraphs::SecondsPerRun(const std::string& key, int repeats) {
  if (auto graph = graphs_.find(key); graph != graphs_.end()) {
    Captured& captured = *graph->second;
    repeats = std::max(repeats, 1);
    // DeviceSeconds turns a failed replay's exception into a Status.
    ASSIGN_OR_RETURN(double seconds, MedianDeviceSeconds(captured.inputs.front().device(), [&] {
                       for (int r = 0; r < repeats; ++r) captured.graph->Replay();
                       return absl::OkStatus();
                     }));
    return seconds / repeats;
  }
  if (auto timed = timed_.find(key); timed != timed_.end() && timed->second.runs > 0)
    return timed->second.seconds / static_cast<double>(timed->second.runs);
  return absl::NotFoundError(absl::StrCat("DeviceGraphs: no work keyed '", key, "' has run"));
}

}  // namespace speclab
