#include "algorithms/verifiers/common/residual_race.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "framework/model/cuda/row_kernels.h"
#include "framework/model/fused_ops.h"
#include "framework/device/kernel_launch.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/verifiers/common/cuda/residual_race.h"
#endif

namespace speclab::verifiers {

at::Tensor ResidualRace(const at::Tensor& p, const at::Tensor& q, const at::Tensor& noise, const at::Tensor& row,
                        const at::Tensor& weights) {
  TORCH_CHECK(p.dim() == 2 && q.sizes() == p.sizes() && noise.sizes() == p.sizes(), "ResidualRace: p ", p.sizes(),
              ", q ", q.sizes(), " and noise ", noise.sizes(), " must be one [rows, cols] shape");
  TORCH_CHECK(row.numel() == 1 && row.scalar_type() == at::kLong, "ResidualRace: row must be int64 [1]");
  TORCH_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == p.size(0)), "ResidualRace: weights ",
              weights.sizes(), " must be [", p.size(0), "]");
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(p) && kernel_launch::FloatRows(q) && kernel_launch::FloatRows(noise) && q.device() == p.device() &&
      noise.device() == p.device() && row.device() == p.device() &&
      (!weights.defined() || (kernel_launch::FloatVector(weights) && weights.device() == p.device()))) {
    const c10::cuda::CUDAGuard guard(p.device());
    const int64_t rows = p.size(0), cols = p.size(1);
    at::Tensor out = at::empty({1}, p.options().dtype(at::kLong));
    at::Tensor workspace = at::empty({3 * row_kernels::RowChunks(cols)}, p.options().dtype(at::kLong));
    kernel_launch::Check(residual_race_kernels::LaunchResidualRace(p.data_ptr<float>(), q.data_ptr<float>(), noise.data_ptr<float>(),
                                                row.contiguous().data_ptr<int64_t>(),
                                                weights.defined() ? weights.data_ptr<float>() : nullptr,
                                                out.data_ptr<int64_t>(),
                                                reinterpret_cast<uint64_t*>(workspace.data_ptr<int64_t>()), rows, cols,
                                                kernel_launch::Stream(p)),
                "ResidualRace");
    return out;
  }
#endif
  const int64_t last = p.size(0) - 1;
  const at::Tensor r = row.reshape({1});
  const at::Tensor p_row = p.index_select(0, r);
  const at::Tensor scaled = weights.defined() ? weights.index_select(0, r).unsqueeze(1) * p_row : p_row;
  const at::Tensor residual = (scaled - q.index_select(0, (r + 1).clamp_max(last))).clamp_min(0);
  at::Tensor s = at::where(r.eq(last).unsqueeze(1), p_row, residual);
  s = at::where(s.gt(0).any(1, /*keepdim=*/true), s, p_row);
  return fused::ArgmaxRows(s, noise.index_select(0, r));
}

}  // namespace speclab::verifiers
