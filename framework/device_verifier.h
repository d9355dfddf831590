// DeviceChainVerifier: a chain verification rule computed on the device.
//
// Host rules (framework/core/verifier.h) read |chain| x vocab probabilities:
// with a 128k-token vocabulary that is megabytes to move and scan every step.
// The device form of a chain rule keeps them where they are, and the step's one
// device-to-host transfer brings back the drafted tokens and two integers.
//
// A device form is registered under its host rule's name, from the rule's own
// plugin folder, and must draw the same output law; the engine uses it for
// chains when DecodeOptions::verify_on_device is set (the default), and the
// host rule otherwise.
#ifndef SPECLAB_FRAMEWORK_DEVICE_VERIFIER_H_
#define SPECLAB_FRAMEWORK_DEVICE_VERIFIER_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "framework/core/registry.h"

namespace speclab {

struct DeviceChainProblem {
  at::Tensor tokens;        // [n] int64: the root, then the n - 1 drafts
  at::Tensor target_probs;  // [n, vocab] float32: p after each node (one-hot at temperature 0)
  at::Tensor draft_probs;   // [n, vocab] float32: row i is the law node i was drawn from; undefined if not sampled
  // Temperature 0: every target row is one-hot, so every lossless chain rule
  // reduces to greedy matching, which a rule may use as its fast path. The
  // draft rows are the drafts' one-hots then, and may be left undefined.
  bool greedy = false;
};

class DeviceChainVerifier {
 public:
  virtual ~DeviceChainVerifier() = default;
  // int64 [2] on the problem's device: the number of accepted drafts, then the
  // extra token. Never waits for the host.
  virtual absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator& generator) const = 0;
};

using DeviceChainVerifierRegistry = Registry<DeviceChainVerifier>;

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_VERIFIER_H_
