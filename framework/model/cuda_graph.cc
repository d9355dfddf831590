#include "framework/model/cuda_graph.h"

#include "absl/strings/str_cat.h"
#include "framework/error_text.h"

#ifdef SPECLAB_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "framework/model/cuda/graph_conditional.h"
#endif

namespace speclab {

#ifdef SPECLAB_WITH_CUDA

namespace {

class TorchCudaGraph final : public CudaGraph {
 public:
  explicit TorchCudaGraph(c10::Device device) : device_(device) {}

  void Replay() override {
    c10::cuda::CUDAGuard guard(device_);
    graph_.replay();
  }

  c10::Device device_;
  at::cuda::CUDAGraph graph_;
  at::cuda::MempoolId_t pool_{0, 0};
};

// The graph this thread is capturing (BeginIf's), or null.
thread_local TorchCudaGraph* capturing = nullptr;

// An IF body being captured: its stream, the stream that captured before it
// and the id of that capture.
struct ConditionalFrame {
  c10::cuda::CUDAStream parent;
  c10::cuda::CUDAStream body;
  unsigned long long parent_capture = 0;
};
thread_local std::vector<ConditionalFrame> conditional_frames;

void CheckCuda(int error, const char* what) {
  TORCH_CHECK(error == cudaSuccess, what, ": ", cudaGetErrorString(static_cast<cudaError_t>(error)));
}

// From now on the graph's allocations are those of `capture`'s stream: the
// allocator serves them from the graph's pool (as LibTorch's capture_begin
// does for the capture it starts).
void AllocateToPoolFor(const TorchCudaGraph& graph, unsigned long long capture) {
  using namespace c10::cuda::CUDACachingAllocator;
  endAllocateToPool(graph.device_.index(), graph.pool_);
  beginAllocateToPool(graph.device_.index(), graph.pool_, [capture](cudaStream_t stream) {
    cudaStreamCaptureStatus status{};
    unsigned long long id = 0;
    return cudaStreamGetCaptureInfo(stream, &status, &id) == cudaSuccess &&
           status == cudaStreamCaptureStatusActive && id == capture;
  });
}

// SPECLAB_GRAPH_CONDITIONALS=0 makes BeginIf and NewCondition no-ops (the work always runs):
// to measure what the conditional nodes cost against the work they skip.
bool ConditionalsEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("SPECLAB_GRAPH_CONDITIONALS");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return enabled;
}

}  // namespace

std::optional<uint64_t> CudaGraph::NewCondition() {
  if (capturing == nullptr || !graph_conditional::Supported() || !ConditionalsEnabled()) return std::nullopt;
  unsigned long long condition = 0;
  CheckCuda(graph_conditional::NewCondition(c10::cuda::getCurrentCUDAStream().stream(), &condition), "IF condition");
  return condition;
}

bool CudaGraph::BeginIf(const at::Tensor& predicate) {
  const std::optional<uint64_t> condition = NewCondition();
  if (!condition) return false;
  TORCH_CHECK(predicate.is_cuda() && predicate.scalar_type() == at::kBool && predicate.numel() == 1,
              "CudaGraph::BeginIf: the predicate must be one bool on the device");
  CheckCuda(graph_conditional::SetCondition(c10::cuda::getCurrentCUDAStream().stream(), *condition,
                                            predicate.data_ptr<bool>()),
            "IF condition");
  return BeginIfSet(condition);
}

bool CudaGraph::BeginIfSet(std::optional<uint64_t> condition) {
  if (!condition) return false;
  ConditionalFrame frame{.parent = c10::cuda::getCurrentCUDAStream(), .body = c10::cuda::getStreamFromPool()};
  while (frame.body == frame.parent) frame.body = c10::cuda::getStreamFromPool();
  CheckCuda(graph_conditional::CaptureId(frame.parent.stream(), &frame.parent_capture), "capture id");
  void* body = nullptr;
  CheckCuda(graph_conditional::AddIfNode(frame.parent.stream(), *condition, &body), "IF node");
  unsigned long long body_capture = 0;
  CheckCuda(graph_conditional::BeginBodyCapture(frame.body.stream(), body, &body_capture), "IF body capture");
  AllocateToPoolFor(*capturing, body_capture);
  c10::cuda::setCurrentCUDAStream(frame.body);
  conditional_frames.push_back(frame);
  return true;
}

void CudaGraph::EndIf(bool began) {
  if (!began) return;
  const ConditionalFrame frame = conditional_frames.back();
  conditional_frames.pop_back();
  CheckCuda(graph_conditional::EndBodyCapture(frame.body.stream()), "IF body capture");
  AllocateToPoolFor(*capturing, frame.parent_capture);
  c10::cuda::setCurrentCUDAStream(frame.parent);
}

bool CudaGraph::Supported() { return true; }

absl::StatusOr<std::unique_ptr<CudaGraph>> CudaGraph::Capture(c10::Device device, const CudaGraph* pool_owner,
                                                              const std::function<void()>& work) {
  if (!device.is_cuda()) return absl::InvalidArgumentError(absl::StrCat("CUDA graph on ", device.str()));
  try {
    c10::cuda::CUDAGuard device_guard(device);
    auto graph = std::make_unique<TorchCudaGraph>(device);
    graph->pool_ = pool_owner != nullptr ? static_cast<const TorchCudaGraph*>(pool_owner)->pool_
                                         : at::cuda::graph_pool_handle();
    // Capture must run on a side stream; it starts after, and the caller's
    // stream resumes after, everything queued so far.
    const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream();
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAEvent ready;
    ready.record(caller);
    ready.block(side);
    {
      c10::cuda::CUDAStreamGuard stream_guard(side);
      work();  // the eager warm-up run: its results are the caller's results
      graph->graph_.capture_begin(graph->pool_);
      capturing = graph.get();
      try {
        work();
      } catch (...) {
        capturing = nullptr;
        conditional_frames.clear();
        throw;
      }
      capturing = nullptr;
      graph->graph_.capture_end();
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(caller);
    return std::unique_ptr<CudaGraph>(std::move(graph));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("CUDA graph capture failed: ", ErrorText(e)));
  }
}

#else  // !SPECLAB_WITH_CUDA

bool CudaGraph::Supported() { return false; }
bool CudaGraph::BeginIf(const at::Tensor&) { return false; }
std::optional<uint64_t> CudaGraph::NewCondition() { return std::nullopt; }
bool CudaGraph::BeginIfSet(std::optional<uint64_t>) { return false; }
void CudaGraph::EndIf(bool) {}

absl::StatusOr<std::unique_ptr<CudaGraph>> CudaGraph::Capture(c10::Device device, const CudaGraph*,
                                                              const std::function<void()>&) {
  return absl::FailedPreconditionError(
      absl::StrCat("CUDA graph on ", device.str(), ": this build of speclab has no CUDA support"));
}

#endif

void CudaGraph::EndNested(const std::vector<bool>& began) {
  for (auto it = began.rbegin(); it != began.rend(); ++it) EndIf(*it);
}

}  // namespace speclab
