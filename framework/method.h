// Method: one drafter + tree builder + verifier + length policy, as configured.
#ifndef SPECLAB_FRAMEWORK_METHOD_H_
#define SPECLAB_FRAMEWORK_METHOD_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "framework/core/length_policy.h"
#include "framework/core/verifier.h"
#include "framework/device_verifier.h"
#include "framework/drafter.h"
#include "framework/tree_builder.h"

namespace speclab {

struct Method {
  std::string name;
  std::string drafter_name, tree_builder_name, verifier_name, policy_name;
  std::unique_ptr<Drafter> drafter;
  std::unique_ptr<TreeBuilder> tree_builder;
  std::unique_ptr<Verifier> verifier;
  std::unique_ptr<DraftLengthPolicy> policy;
  // The verifier's device form, when it has one and the builder draws chains
  // or the form verifies trees (framework/device_verifier.h); null otherwise.
  std::unique_ptr<DeviceVerifier> device_verifier;

  // Refuses combinations that would be wrong, not merely slow: a verifier that
  // needs q with a builder or drafter that cannot give a sampling law, a
  // chain-only verifier with a branching builder, a builder that needs
  // distributions with a token-only drafter.
  absl::Status CheckCompatible() const;
  bool lossless() const { return verifier->traits().losslessness == Losslessness::kLossless; }
};

// Builds a method from its config mapping:
//   {name: NAME, drafter: {type: ...}, tree_builder: {type: ...} (default chain),
//    verifier: {type: ...}, length_policy: {type: ...} (default fixed)}
// and checks that its parts fit together.
absl::StatusOr<Method> CreateMethod(Options& spec, const DrafterEnvironment& environment);

// Sets method.device_verifier from `verifier_spec` (the verifier's config
// mapping) when the verifier has a registered device form and the method's
// tree builder only draws chains, or the form verifies trees too.
absl::Status AttachDeviceVerifier(Method& method, Options verifier_spec);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_METHOD_H_
