#include "framework/device/side_streams.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace speclab {

#ifdef SPECLAB_WITH_CUDA
namespace {

// An event recorded on `stream` now, for other streams to wait on; released
// once no wait needs it (cudaEventDestroy defers while work refers to it).
class Mark {
 public:
  explicit Mark(cudaStream_t stream) {
    error_ = cudaEventCreateWithFlags(&event_, cudaEventDisableTiming);
    if (error_ == cudaSuccess) error_ = cudaEventRecord(event_, stream);
  }
  ~Mark() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  Mark(const Mark&) = delete;
  Mark& operator=(const Mark&) = delete;

  absl::Status WaitOn(cudaStream_t stream) const {
    const cudaError_t error = error_ == cudaSuccess ? cudaStreamWaitEvent(stream, event_, 0) : error_;
    if (error != cudaSuccess)
      return absl::InternalError(absl::StrCat("side streams: ", cudaGetErrorString(error)));
    return absl::OkStatus();
  }

 private:
  cudaEvent_t event_ = nullptr;
  cudaError_t error_;
};

}  // namespace
#endif

bool SideStreamsEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("SPECLAB_SIDE_STREAMS");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return enabled;
}

absl::Status RunSideBySide(c10::Device device, const std::vector<SideWork>& work) {
#ifdef SPECLAB_WITH_CUDA
  if (device.is_cuda() && work.size() > 1 && SideStreamsEnabled()) {
    const c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(device.index());
    const Mark fork(main.stream());
    absl::Status status;
    for (const SideWork& piece : work) {
      const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
      absl::Status waited = fork.WaitOn(side.stream());
      if (!waited.ok()) return waited;
      std::vector<at::Tensor> made;
      {
        const c10::cuda::CUDAStreamGuard guard(side);
        status = piece(made);
      }
      for (at::Tensor& tensor : made)
        if (tensor.defined() && tensor.is_cuda()) tensor.record_stream(main.unwrap());
      const Mark done(side.stream());
      absl::Status joined = done.WaitOn(main.stream());
      if (!joined.ok()) return joined;
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }
#endif
  for (const SideWork& piece : work) {
    std::vector<at::Tensor> made;
    absl::Status status = piece(made);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace speclab
