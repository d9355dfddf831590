// A device rule (framework/device/device_verifier.h) seen as a host Verifier, so
// that the law checks of the host rules (law_check.h) test it too: chains
// through DeviceVerifier::Verify, other trees through VerifyTree where the
// rule verifies trees.
//
// The rule draws from its own generator, seeded once, never from the
// RandomSource: Monte Carlo checks (SampleAgainstTarget) get fresh draws per
// call, and exact checks apply only where the rule is deterministic (one-hot
// rows at temperature 0), since it asks the enumerator no questions.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TESTING_DEVICE_RULE_ADAPTER_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TESTING_DEVICE_RULE_ADAPTER_H_

#include <ATen/core/Generator.h>

#include <memory>
#include <string>
#include <vector>

#include "framework/core/verifier.h"
#include "framework/device/device_verifier.h"

namespace speclab::enumeration {

class DeviceRuleAdapter final : public Verifier {
 public:
  // `name`: a registered device rule; `traits`: those of its host rule.
  // `flag_greedy`: set DeviceChainProblem::greedy when every target row is
  // one-hot, as the engine does at temperature 0 (false tests the general
  // path on such rows). `shift_draft_rows` (negative controls only) hands the
  // rule the q row of the next node instead of the right one.
  static absl::StatusOr<std::unique_ptr<DeviceRuleAdapter>> Create(const std::string& name, VerifierTraits traits,
                                                                    uint64_t seed, bool flag_greedy = true,
                                                                    bool shift_draft_rows = false);

  // Create() with the traits of the host rule registered under `name`.
  static absl::StatusOr<std::unique_ptr<DeviceRuleAdapter>> ForRule(const std::string& name, uint64_t seed,
                                                                     bool flag_greedy = true,
                                                                     bool shift_draft_rows = false);

  VerifierTraits traits() const override { return traits_; }
  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const override;

 private:
  absl::StatusOr<Verdict> VerifyTree(const VerificationProblem& problem, const std::vector<int64_t>& tokens) const;
  DeviceRuleAdapter(std::unique_ptr<DeviceVerifier> rule, VerifierTraits traits, uint64_t seed,
                     bool flag_greedy, bool shift_draft_rows);
  std::unique_ptr<DeviceVerifier> rule_;
  VerifierTraits traits_;
  mutable at::Generator generator_;
  bool flag_greedy_;
  bool shift_draft_rows_;
};

}  // namespace speclab::enumeration

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TESTING_DEVICE_RULE_ADAPTER_H_
