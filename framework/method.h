// Method: one drafter + tree builder + verifier + length policy, as configured.
#ifndef SPECLAB_FRAMEWORK_METHOD_H_
#define SPECLAB_FRAMEWORK_METHOD_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "framework/core/length_policy.h"
#include "framework/core/verifier.h"
#include "framework/device/device_length_stop.h"
#include "framework/device/device_verifier.h"
#include "framework/drafter.h"
#include "framework/sampling.h"
#include "framework/tree_builder.h"

namespace speclab {

// A drafter's own sampling settings (a method's `draft_sampling:`): each one
// set replaces the experiment's for drafting. Drafts are drawn from q
// processed with them and verifiers read that q, so every rule stays exact;
// multi-draft papers draft at another temperature than the target's.
struct DrafterSampling {
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;

  // The settings drafts are drawn with while the target samples with `target`.
  SamplingParams For(const SamplingParams& target) const {
    return {.temperature = temperature.value_or(target.temperature),
            .top_k = top_k.value_or(target.top_k),
            .top_p = top_p.value_or(target.top_p)};
  }
};

struct Method {
  std::string name;
  std::string drafter_name, tree_builder_name, verifier_name, policy_name;
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<TreeBuilder> tree_builder;
  std::unique_ptr<Verifier> verifier;
  std::unique_ptr<DraftLengthPolicy> policy;
  DrafterSampling drafter_sampling;
  bool length_policy_configured = false;  // the spec set length_policy: the builder must follow it
  // The verifier's device form, when it has one and the builder draws chains
  // or the form verifies trees (framework/device/device_verifier.h); null otherwise.
  std::unique_ptr<DeviceVerifier> device_verifier;
  // Why the verifier's device form declined these options (its create
  // returned Unimplemented: a rule's variant computed on the host only); empty otherwise.
  std::string device_verifier_declined;
  // The length policy's device-side stop, when it stops token by token and
  // has one (framework/device/device_length_stop.h); null otherwise.
  std::unique_ptr<DeviceLengthStop> device_stop;

  // Refuses combinations that would be wrong, not merely slow: a verifier that
  // needs q with a builder or drafter that cannot give a sampling law, a
  // chain-only verifier with a branching builder, a builder that needs
  // distributions with a token-only drafter, and a length policy the builder
  // would ignore (configured for a builder that shapes its own trees, or one
  // that stops token by token with a builder that never asks it).
  absl::Status CheckCompatible() const;
  bool lossless() const { return verifier->traits().losslessness == Losslessness::kLossless; }
};

// Why `method` has no device verifier for its drafts, naming the verifier
// (and the builder, where the verifier's device form verifies chains only).
std::string WhyNoDeviceVerifier(const Method& method);

// Builds a method from its config mapping:
//   {name: NAME, drafter: {type: ...}, tree_builder: {type: ...} (default chain),
//    verifier: {type: ...}, length_policy: {type: ...} (default fixed),
//    draft_sampling: {temperature: T, top_k: K, top_p: P} (each optional)}
// and checks that its parts fit together.
absl::StatusOr<Method> CreateMethod(Options& spec, const DrafterEnvironment& environment);

// Sets method.device_verifier from `verifier_spec` (the verifier's config
// mapping) when the verifier has a registered device form and the method's
// tree builder only draws chains, or the form verifies trees too.
absl::Status AttachDeviceVerifier(Method& method, Options verifier_spec);

// Sets method.device_stop from `policy_spec` (the length policy's config
// mapping) when the policy stops token by token and has a registered device
// form.
absl::Status AttachDeviceStop(Method& method, Options policy_spec);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_METHOD_H_
