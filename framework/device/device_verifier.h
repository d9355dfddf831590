// DeviceVerifier: a verification rule computed on the device.
//
// Host rules (framework/core/verifier.h) read |tree| x vocab probabilities:
// with a 128k-token vocabulary that is megabytes to move and scan every step.
// The device form of a rule keeps them where they are, and the step's one
// device-to-host transfer brings back the drafted tokens and a few integers.
//
// A device form is registered under its host rule's name, from the rule's own
// plugin folder, and must draw the same output law; the engine uses it when
// DecodeOptions::verify_on_device is set (the default): for chains, and for
// the trees of branching builders where the form verifies trees. Otherwise
// the host rule. A form's create may return Unimplemented for options it does
// not compute (a variant of the rule kept on the host): the method then runs
// the host rule and says why (Method::device_verifier_declined).
#ifndef SPECLAB_FRAMEWORK_DEVICE_DEVICE_VERIFIER_H_
#define SPECLAB_FRAMEWORK_DEVICE_DEVICE_VERIFIER_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/core/registry.h"
#include "framework/core/verifier.h"

namespace speclab {

struct DeviceChainProblem {
  at::Tensor tokens;        // [n] int64: the root, then the n - 1 drafts
  at::Tensor target_probs;  // [n, vocab] float32: p after each node (one-hot at temperature 0)
  at::Tensor draft_probs;   // [n, vocab] float32: row i is the law node i was drawn from; undefined if not sampled
  // Temperature 0: every target row is one-hot, so every lossless chain rule
  // reduces to greedy matching, which a rule may use as its fast path. The
  // draft rows are the drafts' one-hots then, and may be left undefined, and
  // rules read only each target row's argmax: callers may pass the target's
  // logits instead of their one-hots (the engine does: TargetRows).
  bool greedy = false;
};

struct DeviceTreeProblem {
  at::Tensor tokens;        // [n] int64: the root, then the n - 1 drafts
  at::Tensor parents;       // [n] int64: -1 for the root, else an earlier node
  at::Tensor target_probs;  // [n, vocab] float32: p after each node (one-hot at temperature 0)
  // [n, vocab] float32: row i is the law node i was drawn from (row 0 unused;
  // siblings drawn from one law share it); undefined if not sampled.
  at::Tensor draft_probs;
  DraftSampling sampling = DraftSampling::kDeterministic;  // how the drafts were drawn from those rows
  bool greedy = false;      // temperature 0, as DeviceChainProblem::greedy
  // What the host knows without reading the device, for rules whose cost
  // grows with it (khisti): the most children a node has (-1: up to n - 1),
  // and the most nonzero entries of a draft row (the drafts' top_k; -1: the
  // whole vocabulary).
  int64_t branching_bound = -1;
  int64_t draft_support_bound = -1;
};

class DeviceVerifier {
 public:
  virtual ~DeviceVerifier() = default;
  // int64 [2] on the problem's device: the number of accepted drafts, then the
  // extra token. Never waits for the host.
  virtual absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator& generator) const = 0;
  // True where the rule decides a chain's drafts from the root down, each on
  // the drafts before it alone (rejection sampling and its kin; not block
  // verification or traversal, which weigh the whole chain): its verdict on a
  // chain's first L drafts is then its verdict on those L drafts alone, up to
  // where it stops, and a chain drafted past a length policy's device-side
  // stop may be verified whole and cut after (device_length_stop.h).
  virtual bool verifies_prefixes_alone() const { return false; }
  // Trees, for rules that verify them on the device (verifies_trees()):
  // int64 [n + 1] on the problem's device, verifiers::TreeWalk's answer (algorithms/verifiers/common/tree_on_device.h): the
  // number a of accepted drafts, the accepted nodes root-down in slots 1..a,
  // then the extra token. Never waits for the host.
  virtual bool verifies_trees() const { return false; }
  virtual absl::StatusOr<at::Tensor> VerifyTree(const DeviceTreeProblem& problem, at::Generator& generator) const;
};

using DeviceVerifierRegistry = Registry<DeviceVerifier>;

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_VERIFIER_H_
