// Building blocks of tree verification rules on the device.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_ON_DEVICE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_ON_DEVICE_H_

#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/device/device_verifier.h"

namespace speclab::verifiers {

// Checks shapes: tokens and parents [n] int64 with n >= 1, target rows [n,
// vocab], and (when `needs_draft`) draft rows of the same shape.
absl::Status CheckDeviceTree(const DeviceTreeProblem& problem, const std::string& rule, bool needs_draft = false);

// The rule's answer (DeviceVerifier::VerifyTree) for one y [n] int64 per
// node: descend from the root into the child equal to y at each node
// (TreeWalk), the first such child where siblings repeat a token.
// With y ~ p at every node this is the point-mass rule in its
// sample-then-match form (with one-hot p too). Not greedy's host rule, which
// takes the deepest matched path where siblings repeat a token.
absl::StatusOr<at::Tensor> MatchWalk(const DeviceTreeProblem& problem, const at::Tensor& y);

// A chain as a tree (parents i - 1), for rules whose chain form is their
// tree form; `sampling` says how the drafts were drawn.
DeviceTreeProblem ChainAsTree(const DeviceChainProblem& problem, DraftSampling sampling);

// A tree walk's answer [n + 1] on a chain as the chain's answer [2] (the
// count, then the extra token), on the device: no host copy of an index.
at::Tensor ChainAnswerOfWalk(const at::Tensor& walk);

// The answer (DeviceVerifier::VerifyTree) that accepts the path to `best`
// ([1] int64) and emits `extra` ([1] int64), for rules that choose the node
// on the device: mask [n, n] bool is the tree's ancestor mask
// (fused::TreeMask). No host read.
at::Tensor PathAnswer(const at::Tensor& mask, const at::Tensor& best, const at::Tensor& extra);

// The sample-then-match walk (the point-mass rule given one y ~ p per node):
// from the root, descend into the first child, in index order, whose token
// equals y at the current node, until none does. parents (node 0 the root; 0 <= parents[i] < i otherwise),
// tokens, y [n] int64. Returns int64 [n + 1]: the number a of accepted
// nodes, the accepted nodes root-down in slots 1..a (0 after), then y at the
// node where the walk stopped. Elsewhere than CUDA, a walk on the host.
at::Tensor TreeWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& y);

// Throws (TORCH_CHECK, naming `walk`) unless a sampled tree walk's inputs
// fit: parents, tokens int64 [n >= 1]; p, q float32 [n, vocab]; uniforms
// float32 [uniforms_per_node * n]; noise float32 [vocab]; all on one device.
// Returns n.
int64_t CheckWalkInputs(const char* walk, const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p,
                        const at::Tensor& q, const at::Tensor& uniforms, int64_t uniforms_per_node,
                        const at::Tensor& noise);

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_TREE_ON_DEVICE_H_
