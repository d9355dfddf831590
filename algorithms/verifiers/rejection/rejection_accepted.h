#ifndef SPECLAB_ALGORITHMS_VERIFIERS_REJECTION_REJECTION_ACCEPTED_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_REJECTION_REJECTION_ACCEPTED_H_

// The chain rejection rule's count on the device (rejection_device.cc), its
// kernel in cuda/.
#include <ATen/core/Tensor.h>

namespace speclab::verifiers {

// The number of drafts chain rejection sampling accepts: the leading i with
// u[i] * q[i + 1][x_i] < p[i][x_i], x_i = tokens[i + 1], as a 0-d int64
// (draft i accepted with probability min(1, p/q)). tokens [rows] int64 (the
// root, then the drafts); p, q [rows, cols] float32; u [rows - 1] float32.
// One tiny kernel on CUDA; ATen: gathers, a compare and a cumulative product.
at::Tensor RejectionAccepted(const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q, const at::Tensor& u);

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_REJECTION_REJECTION_ACCEPTED_H_
