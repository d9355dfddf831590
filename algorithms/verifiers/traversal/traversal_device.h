// Traversal verification on the device (host rule: traversal_verifier.cc,
// §1.10): the whole leaf-to-root traversal in one CUDA block (cuda/), the
// weights and the bookkeeping in shared memory and each residual a
// block-wide pass over the vocabulary; one launch a step.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TRAVERSAL_TRAVERSAL_DEVICE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TRAVERSAL_TRAVERSAL_DEVICE_H_

#include <ATen/core/Tensor.h>

namespace speclab::traversal {

// The traversal given its random numbers: the i-th accept test of the walk
// (leaf v accepted with probability α_v) passes when uniforms[i] < α_v, and
// the extra token is the exponential race (argmax P_v / noise) over the
// accepted leaf's row. parents, tokens [n] int64 (children follow their
// parent); p, q [n, vocab] float32 (q's row c: the law child c was drawn
// from, shared by siblings); `masked`: siblings were drawn without
// replacement; uniforms [n], noise [vocab] float32; all on one device.
// Returns int64 [n + 1], DeviceVerifier::VerifyTree's answer. One launch on
// CUDA for trees of up to 256 nodes; elsewhere the same float32 arithmetic
// on the host.
at::Tensor TraversalWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p,
                         const at::Tensor& q, bool masked, const at::Tensor& uniforms, const at::Tensor& noise);

}  // namespace speclab::traversal

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TRAVERSAL_TRAVERSAL_DEVICE_H_
