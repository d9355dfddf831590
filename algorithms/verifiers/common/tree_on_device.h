// Building blocks of tree verification rules on the device.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_ON_DEVICE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_ON_DEVICE_H_

#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/device/device_verifier.h"

namespace speclab::verifiers {

// Checks shapes: tokens and parents [n] int64 with n >= 1, target rows [n, vocab].
absl::Status CheckDeviceTree(const DeviceTreeProblem& problem, const std::string& rule);

// The rule's answer (DeviceVerifier::VerifyTree) for one y [n] int64 per
// node: descend from the root into the child equal to y at each node
// (fused::TreeWalk), the first such child where siblings repeat a token.
// With y ~ p at every node this is the point-mass rule in its
// sample-then-match form (with one-hot p too). Not greedy's host rule, which
// takes the deepest matched path where siblings repeat a token.
absl::StatusOr<at::Tensor> MatchWalk(const DeviceTreeProblem& problem, const at::Tensor& y);

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_ON_DEVICE_H_
