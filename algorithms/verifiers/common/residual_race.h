#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RESIDUAL_RACE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RESIDUAL_RACE_H_

// The chain rules' stopping token on the device (rejection's and block's
// device forms), its kernel in cuda/.
#include <ATen/core/Tensor.h>

namespace speclab::verifiers {

// The stopping token of chain rejection sampling at the stopping row
// r = row[0] (row: [1] int64 on the device, 0 <= r < rows), raced with
// `noise`: the exponential race (fused::ArgmaxRows with a divisor) over
// s = (w p[r] - q[r + 1])+ for r < rows - 1 and s = p[r] for the last row, or
// over p[r] where s has no positive entry; w = weights[r] (block
// verification's, [rows] float32), 1 where weights is undefined. p, q, noise
// [rows, cols] float32. Returns [1] int64. Equal to racing every row's s and
// keeping row r, reading one row instead of all. ATen: that formula on row r.
at::Tensor ResidualRace(const at::Tensor& p, const at::Tensor& q, const at::Tensor& noise, const at::Tensor& row,
                        const at::Tensor& weights = at::Tensor());

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RESIDUAL_RACE_H_
