// DeviceLengthStop: a length policy's per-token stop, computed on the device.
//
// A policy that stops drafting token by token (DraftLengthPolicy::
// ContinueDrafting) reads each drafted token on the host: a synchronisation a
// token, and no pipelining. Its device form lets the engine decide on the
// device after each drafted token, from that token's facts, whether to go
// on: the drafter's graph skips the forwards past the stop (conditional
// nodes, where the drafter and LibTorch have them; elsewhere the chain is
// drafted to the policy's maximum), nothing is read back, the target
// verifies the whole chain, and the verdict is cut after the kept drafts
// (PipelinedChain). That
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

#include <functional>
#include <string>

#include "framework/core/length_policy.h"
#include "framework/core/registry.h"

namespace speclab {

// The DraftProgress of each drafted token of a chain, on the device.
struct DeviceDraftFacts {
  at::Tensor draft_probability;  // [gamma] float32: q(token) of the drafted token
  at::Tensor draft_entropy;      // [gamma] float32: the drafter's own entropy there, in nats
  at::Tensor top_probability;    // [gamma] float32: the drafter's own largest probability there
  // The row the policy reads (DraftLengthPolicy::draft_row()), else
  // undefined: [gamma, vocab] float32, the drafter's own log-probabilities
  // there, or [gamma, hidden] float32, its final hidden state there.
  at::Tensor log_probs;
  at::Tensor hidden;
};

// facts [gamma, 3] float32, the columns in DeviceDraftFacts' order (how
// chain builders keep them: DraftTree::draft_facts), as DeviceDraftFacts;
// [gamma, 3 + width] with the rows of `row` after them.
DeviceDraftFacts FactsOfColumns(const at::Tensor& facts, DraftRow row);

class DeviceLengthStop {
 public:
  DeviceLengthStop();
  virtual ~DeviceLengthStop() = default;

  // bool [n] on the facts' device, for the facts of a chain's first n drafts:
  // stop[i] is true where the host rule's ContinueDrafting is false after
  // draft i (that draft kept). stop[i] may read the facts of drafts 0..i
  // only, never later ones: the engine asks after each draft, with the facts
  // so far (ChainPick::StoppedBy), and skips the drafts past the first stop.
  // Never waits for the host.
  virtual at::Tensor Stops(const DeviceDraftFacts& facts) const = 0;

  // int64 [1] on the facts' device: how many of the gamma drafts the policy
  // keeps, in [1, gamma]: the first i whose Stops() is true, plus 1, else
  // gamma.
  at::Tensor KeptLength(const DeviceDraftFacts& facts) const;

  // Distinct for every stop object (captured graphs that run it are cached
  // under it).
  const std::string& key() const { return key_; }

 private:
  const std::string key_;
};

using DeviceLengthStopRegistry = Registry<DeviceLengthStop>;

// The first index i where stop[i] holds, plus 1, else stop's length: int64
// [1] on stop's device. stop [gamma] bool.
at::Tensor FirstStopLength(const at::Tensor& stop);

// For a host rule `holds` on a float32 fact widened to float64 that is
// monotone on [0, +inf] (false up to some value, true from it on, as a rule
// of rounded products, square roots and comparisons of the fact is): the
// smallest float in [0, +inf] where it holds, as a float64 (NaN where none
// does). A device form then decides with one float32 comparison against it
// (fact >= bound where the rule says stop, fact < bound where it says go
// on), exactly as the host rule's float64 operations on every fact in [0,
// +inf]. Found by bisection over the floats' bit patterns.
double FirstFloatWhere(const std::function<bool(double)>& holds);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_LENGTH_STOP_H_
