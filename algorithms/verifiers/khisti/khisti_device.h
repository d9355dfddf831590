// Khisti et al.'s canonical two-step verification on the device (host rule:
// khisti_verifier.cc, §1.8): every node decides at once, one CUDA block each
// (cuda/), and one thread walks the decisions; one transfer a step.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_KHISTI_DEVICE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_KHISTI_DEVICE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace speclab::khisti {

// The most tokens of a q row a node with K >= 2 drafts can hold (the
// kernel's shared memory), and the most drafts it takes.
inline constexpr int64_t kDeviceMaxSupport = 2048;
inline constexpr int64_t kDeviceMaxDrafts = 32;

// The two-step rule over a tree given its random numbers. Node u's K
// children were drawn i.i.d. from the first child's q row. Step 1 selects
// one distinct drafted token Y with weights p/q (uniform where all are 0):
// the first whose running sum exceeds uniforms[2u] times the total. Step 2
// accepts Y's first child when uniforms[2u + 1] r(Y) < p(Y), r being the
// exact law of Y (r = q at K = 1; at K >= 2 summed over q's support,
// s^K tuples). A node that stops draws its extra token by the exponential
// race (argmax law / noise) over (p - r)+, or p at a leaf. A node whose
// K >= 2 drafts exceed kDeviceMaxDrafts, kDeviceMaxSupport tokens of
// support, s^K > max_selection_tuples or s^(K-1) >= 2^31 (the kernel counts
// tail tuples in 32 bits) stops without trying them, drawing
// from p: exact, and refused beforehand by the device form wherever the host
// knows the bounds (KhistiOnDevice). parents, tokens [n] int64 (children
// follow their parent); p, q [n, vocab] float32; uniforms [2 n], noise
// [vocab] float32; on one device. Returns int64 [n + 1],
// DeviceVerifier::VerifyTree's answer. One kernel pair on CUDA for trees of
// up to 256 nodes; elsewhere the same float32 arithmetic on the host.
at::Tensor CanonicalTreeWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p,
                             const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise,
                             double max_selection_tuples);

}  // namespace speclab::khisti

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_KHISTI_DEVICE_H_
