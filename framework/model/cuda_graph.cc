#include "framework/model/cuda_graph.h"

#include "absl/strings/str_cat.h"
#include "framework/error_text.h"

#ifdef SPECLAB_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
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

}  // namespace

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
      work();
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

absl::StatusOr<std::unique_ptr<CudaGraph>> CudaGraph::Capture(c10::Device device, const CudaGraph*,
                                                              const std::function<void()>&) {
  return absl::FailedPreconditionError(
      absl::StrCat("CUDA graph on ", device.str(), ": this build of speclab has no CUDA support"));
}

#endif

}  // namespace speclab
