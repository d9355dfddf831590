#include "algorithms/verifiers/block/block_accepted.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "algorithms/verifiers/common/chain_on_device.h"
#include "framework/model/cuda/row_kernels.h"
#include "framework/device/kernel_launch.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/verifiers/block/cuda/block_kernels.h"
#endif

namespace speclab::verifiers {

std::pair<at::Tensor, at::Tensor> BlockAccepted(const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q,
                                                const at::Tensor& u) {
  CheckChainCountInputs("BlockAccepted", tokens, p, q, u, /*min_rows=*/2);
  const int64_t gamma = p.size(0) - 1;
#ifdef SPECLAB_WITH_CUDA
  if (ChainCountKernelsTake(tokens, p, q, u)) {
    const c10::cuda::CUDAGuard guard(p.device());
    at::Tensor accepted = at::empty({}, p.options().dtype(at::kLong));
    at::Tensor weights = at::empty({gamma + 1}, p.options());
    at::Tensor workspace = at::empty({std::max<int64_t>(1, gamma - 1) * row_kernels::RowChunks(p.size(1))}, p.options());
    const at::Tensor ids = tokens.contiguous();
    kernel_launch::Check(block_kernels::LaunchBlockAccepted(ids.data_ptr<int64_t>(), p.data_ptr<float>(), q.data_ptr<float>(),
                                                 u.data_ptr<float>(), accepted.data_ptr<int64_t>(),
                                                 weights.data_ptr<float>(), workspace.data_ptr<float>(), p.size(0),
                                                 p.size(1), kernel_launch::Stream(p)),
                "BlockAccepted");
    return {accepted, weights};
  }
#endif
  const at::Tensor x = tokens.narrow(0, 1, gamma).unsqueeze(1);
  const at::Tensor px = p.narrow(0, 0, gamma).gather(1, x).squeeze(1);  // p[i-1][x_i], i = 1..gamma
  const at::Tensor qx = q.narrow(0, 1, gamma).gather(1, x).squeeze(1);  // q[i][x_i]
  const at::Tensor ratio = at::where(qx > 0, px / qx, at::zeros_like(px));
  const at::Tensor log_weight = at::cat({at::zeros({1}, p.options()), ratio.log().cumsum(0)});  // L_0..L_gamma
  const at::Tensor weights = (log_weight - std::get<0>(log_weight.cummax(0))).exp();
  at::Tensor h = weights.narrow(0, gamma, 1);  // h_gamma
  if (gamma > 1) {
    const at::Tensor w = weights.narrow(0, 1, gamma - 1);  // w_1..w_{gamma-1}
    const at::Tensor mass = (w.unsqueeze(1) * p.narrow(0, 1, gamma - 1) - q.narrow(0, 2, gamma - 1)).clamp_min(0).sum(1);
    const at::Tensor denominator = mass + 1 - w;
    h = at::cat({at::where(denominator > 0, mass / denominator, at::ones_like(mass)), h});
  }
  const at::Tensor drawn = (u < h).to(at::kLong) * at::arange(1, gamma + 1, tokens.options());
  return {drawn.max(), weights};
}

}  // namespace speclab::verifiers
