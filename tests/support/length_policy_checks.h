// Engine checks shared by the draft-length policies' tests.
#ifndef SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_
#define SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "framework/core/length_policy.h"

namespace speclab::testing {

// The registered policy a YAML mapping such as "{type: bandit, arms: [2, 4]}" names.
absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> MakeLengthPolicy(const std::string& yaml);

// MakeLengthPolicy's error message ("" where it succeeds), for option tests.
std::string LengthPolicyError(const std::string& yaml);

// A chain method with the policy `policy_yaml` (registered as `policy_name`)
// and a tiny model drafter (`drafter_seed`, 1 being the target's own
// weights; `drafter_logit_scale` as TinyModel's) decodes 40 tokens at T = 0:
// expects greedy decoding's tokens, more than one drafted length, and the
// engine naming the policy as why it stepped on the host.
void ExpectGreedyWithAMovingLength(const std::string& policy_yaml, const std::string& policy_name,
                                   uint64_t drafter_seed, double drafter_logit_scale = 30);

// The same chain with rejection sampling, 2000 two-token generations at T =
// 1 against the target's exact law (chi-square at a 1e-4 false-alarm
// level); expects more than one drafted length among them.
void ExpectChainLawWithPolicy(const std::string& policy_yaml, const std::string& policy_name);

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_
