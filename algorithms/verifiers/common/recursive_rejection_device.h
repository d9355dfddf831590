// Recursive rejection over a whole tree on the device: the device form of
// specinfer, rrs and rrs_wor (host rules: recursive_rejection.h, §1.5-§1.6),
// its kernel in cuda/.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RECURSIVE_REJECTION_DEVICE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RECURSIVE_REJECTION_DEVICE_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <string>

#include "algorithms/verifiers/common/sampled_tree_rule.h"
#include "framework/device/device_verifier.h"

namespace speclab::verifiers {

// Which q row a child is tried against (the rules differ only there).
enum class SiblingRows {
  kOwn,                        // its own: q's row of the child (SpecInfer)
  kShared,                     // its parent's first child's row, shared by i.i.d. siblings (RRS)
  kSharedWithoutReplacement,  // that row with the earlier siblings' tokens removed and renormalised (RRS w/o r.)
};

// The walk of recursive rejection sampling, given its random numbers: every
// node with children tries them in index order against the running residual
// (child c accepted when uniforms[c] q_c(x_c) < p~(x_c); on a reject p~ <-
// norm((p~ - q_c)+), kept as it is where that has no mass); the walk descends
// from the root through accepted children, and the extra token is the
// exponential race (argmax law / noise) over the law where it stops: the
// residual, or p at a leaf. parents, tokens [n] int64 (children follow their
// parent), p, q [n, vocab] float32 (q row c: the law child c was drawn from),
// uniforms [n] float32, noise [vocab] float32 Exp(1), on one device.
// Returns int64 [n + 1], DeviceVerifier::VerifyTree's answer. One kernel
// pair on CUDA; elsewhere the same arithmetic on the host.
at::Tensor RecursiveRejectionWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p,
                                  const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise,
                                  SiblingRows rows);

// The device form of a recursive rejection rule, on trees and chains (a
// chain is a tree). At temperature 0 every such rule is greedy matching.
class RecursiveRejectionOnDevice final : public SampledTreeRule {
 public:
  RecursiveRejectionOnDevice(std::string rule, SiblingRows rows);
  bool verifies_prefixes_alone() const override { return true; }  // a chain from the root down

 private:
  at::Tensor Walk(const DeviceTreeProblem& problem, const at::Tensor& parents, const at::Tensor& tokens,
                  const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise) const override;

  SiblingRows rows_;
};

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_RECURSIVE_REJECTION_DEVICE_H_
