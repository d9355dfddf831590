// SpecTr's K-SEQ on the device (host rule: spectr_verifier.cc, §1.7): every
// group of nodes carrying one prefix decides at once, one CUDA block each
// (cuda/), and one block walks the decisions; one transfer a step.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_SPECTR_DEVICE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_SPECTR_DEVICE_H_

#include <ATen/core/Tensor.h>

namespace speclab::spectr {

// K-SEQ over a tree given its random numbers. Nodes with the same path of
// tokens form a group (duplicate draws pool their continuations, as K
// drafted sequences do); a group's candidates are its nodes' children in
// index order, all drawn i.i.d. from the first candidate's q row. ρ is the
// smallest valid value to a bracket of (k - 1) 2.4e-10 (float32 sums);
// candidate c (token x) is accepted when uniforms[c] ρ q(x) < p(x), p being
// the group's first node's row. Where all k fail, the extra token is the
// exponential race (argmax law / noise) over the K-SEQ residual, or over p
// at a leaf. The accepted path is the last accepted node's ancestry.
// parents, tokens [n] int64 (children follow their parent); p, q [n, vocab]
// float32; uniforms [n], noise [vocab] float32; all on one device.
// Returns int64 [n + 1], DeviceVerifier::VerifyTree's answer. One kernel
// pair on CUDA for trees of up to 256 nodes; elsewhere the same float32
// arithmetic on the host.
at::Tensor KSeqTreeWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q,
                        const at::Tensor& uniforms, const at::Tensor& noise);

}  // namespace speclab::spectr

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_SPECTR_DEVICE_H_
