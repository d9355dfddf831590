#include "algorithms/verifiers/rejection/rejection_accepted.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "algorithms/verifiers/common/chain_on_device.h"
#include "framework/device/kernel_launch.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/verifiers/rejection/cuda/rejection_kernels.h"
#endif

namespace speclab::verifiers {

at::Tensor RejectionAccepted(const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q, const at::Tensor& u) {
  CheckChainCountInputs("RejectionAccepted", tokens, p, q, u, /*min_rows=*/1);
  const int64_t drafts = p.size(0) - 1;
#ifdef SPECLAB_WITH_CUDA
  if (ChainCountKernelsTake(tokens, p, q, u)) {
    const c10::cuda::CUDAGuard guard(p.device());
    at::Tensor out = at::empty({}, p.options().dtype(at::kLong));
    const at::Tensor ids = tokens.contiguous();
    kernel_launch::Check(rejection_kernels::LaunchRejectionAccepted(ids.data_ptr<int64_t>(), p.data_ptr<float>(), q.data_ptr<float>(),
                                                     u.data_ptr<float>(), out.data_ptr<int64_t>(), p.size(0), p.size(1),
                                                     kernel_launch::Stream(p)),
                "RejectionAccepted");
    return out;
  }
#endif
  if (drafts == 0) return at::zeros({}, tokens.options());
  const at::Tensor x = tokens.narrow(0, 1, drafts).unsqueeze(1);
  const at::Tensor accepted =
      u * q.narrow(0, 1, drafts).gather(1, x).squeeze(1) < p.narrow(0, 0, drafts).gather(1, x).squeeze(1);
  return accepted.to(at::kLong).cumprod(0).sum();
}

}  // namespace speclab::verifiers
