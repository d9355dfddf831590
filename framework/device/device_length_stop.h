// DeviceLengthStop: a length policy's per-token stop, computed on the device.
//
// A policy that stops drafting token by token (DraftLengthPolicy::
// ContinueDrafting) reads each drafted token on the host: a synchronisation a
// token, and no pipelining. Its device form lets the engine draft the chain
// to the policy's maximum inside the drafter's graph, keeping each drafted
// token's facts there, and cut it where the host rule would have stopped,
// from those facts, with nothing read back: the target verifies the whole
// chain, and the verdict is cut after the kept drafts (PipelinedChain). That
// is exact for rules that decide a chain's drafts from the root down, each on
// what came before it (DeviceVerifier::verifies_prefixes_alone()), since the
// drafts past the stop then never influence the verdict on those before it.
//
// A device form is registered under its policy's name, from the policy's own
// plugin folder, with the same options, and must keep exactly the drafts the
// host rule keeps. It suits policies whose stop rule and maximum length do
// not change with the steps they observe.
#ifndef SPECLAB_FRAMEWORK_DEVICE_DEVICE_LENGTH_STOP_H_
#define SPECLAB_FRAMEWORK_DEVICE_DEVICE_LENGTH_STOP_H_

#include <ATen/core/Tensor.h>

#include "framework/core/registry.h"

namespace speclab {

// The DraftProgress of each drafted token of a chain, on the device.
struct DeviceDraftFacts {
  at::Tensor draft_probability;  // [gamma] float32: q(token) of the drafted token
  at::Tensor draft_entropy;      // [gamma] float32: the drafter's own entropy there, in nats
  at::Tensor top_probability;    // [gamma] float32: the drafter's own largest probability there
  // [gamma, vocab] float32: the drafter's own log-probabilities there, where
  // the policy wants_log_probs(); else undefined.
  at::Tensor log_probs;
};

// facts [gamma, 3] float32, the columns in DeviceDraftFacts' order (how
// chain builders keep them: DraftTree::draft_facts), as DeviceDraftFacts;
// [gamma, 3 + vocab] with the log-probability rows after them.
DeviceDraftFacts FactsOfColumns(const at::Tensor& facts);

class DeviceLengthStop {
 public:
  virtual ~DeviceLengthStop() = default;
  // int64 [1] on the facts' device: how many of the gamma drafts the policy
  // keeps, in [1, gamma]: the first depth d whose facts make the host rule's
  // ContinueDrafting false (that draft kept), else gamma. Never waits for the
  // host.
  virtual at::Tensor KeptLength(const DeviceDraftFacts& facts) const = 0;
};

using DeviceLengthStopRegistry = Registry<DeviceLengthStop>;

// The first index i where stop[i] holds, plus 1, else stop's length: int64
// [1] on stop's device, for KeptLength. stop [gamma] bool.
at::Tensor FirstStopLength(const at::Tensor& stop);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_LENGTH_STOP_H_
