// Engine checks shared by the draft-length policies' tests.
#ifndef SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_
#define SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_

#include <cstdint>
#include <string>

namespace speclab::testing {

// A chain method with the policy `policy_yaml` (registered as `policy_name`)
// and a tiny model drafter (`drafter_seed`; 1 is the target's own weights)
// decodes 40 tokens at T = 0: expects greedy decoding's tokens, more than one
// drafted length, and the engine saying the policy decides each step.
void ExpectGreedyWithAMovingLength(const std::string& policy_yaml, const std::string& policy_name,
                                   uint64_t drafter_seed);

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_
