// Engine checks shared by the draft-length policies' tests.
#ifndef SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_
#define SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "framework/core/length_policy.h"
#include "framework/device/device_length_stop.h"

namespace speclab::testing {

// The registered policy a YAML mapping such as "{type: bandit, arms: [2, 4]}" names.
absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> MakeLengthPolicy(const std::string& yaml);

// The device form (framework/device/device_length_stop.h) of the policy such
// a mapping names; NotFound where it has none.
absl::StatusOr<std::unique_ptr<DeviceLengthStop>> MakeDeviceStop(const std::string& yaml);

// MakeLengthPolicy's error message ("" where it succeeds), for option tests.
std::string LengthPolicyError(const std::string& yaml);

// How a policy's checks run: its host rule, the engine stepping on the host
// (and naming the policy as why), or its device form (device_length_stop.h),
// the engine pipelining chains cut on the device.
enum class PolicyForm { kHost, kDevice };

// A chain method with the policy `policy_yaml` (registered as `policy_name`)
// and a tiny model drafter (`drafter_seed`, 1 being the target's own
// weights; `drafter_logit_scale` as TinyModel's) decodes 40 tokens at T = 0,
// pipelined where the engine can and step by step: expects greedy decoding's
// tokens, more than one drafted length, and the engine form `form` implies.
void ExpectGreedyWithAMovingLength(const std::string& policy_yaml, const std::string& policy_name,
                                   uint64_t drafter_seed, double drafter_logit_scale = 30,
                                   PolicyForm form = PolicyForm::kHost);

// The same chain with rejection sampling, 2000 two-token generations at T =
// 1 against the target's exact law (chi-square at a 1e-4 false-alarm
// level); expects more than one drafted length among them (kHost), or chains
// cut short of the maximum (kDevice).
void ExpectChainLawWithPolicy(const std::string& policy_yaml, const std::string& policy_name,
                              PolicyForm form = PolicyForm::kHost);

// The policy's device form keeps, on 200 random chains of facts (top and
// drawn probabilities in [0, 1], entropies in [0, 5] nats, float32 as
// drafting keeps them; for a policy that reads log-probabilities, random rows
// of its vocabulary, peaked to flat; for one that reads hidden states, random
// normal rows of its width), exactly the drafts
// its host rule keeps: the first depth where ContinueDrafting is false, else
// MaxDraftLength().
void ExpectDeviceStopKeepsTheHostRulesDrafts(const std::string& policy_yaml);

// The one fact a threshold rule reads: the drafter's entropy (random values
// in [0, 30] nats) or its top probability (in [0, 1]).
enum class DraftFact { kEntropy, kTopProbability };

// For a policy whose rule reads that fact alone and changes its answer once
// over [0, +inf] (a threshold, however rounded): its device form decides as
// the host rule on the floats around the change (eight on each side), on 0,
// -0, a negative, +inf and NaN, and on 2000 random values of the fact.
void ExpectDeviceStopDecidesAsTheHostRuleOnFact(const std::string& policy_yaml, DraftFact fact);

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_LENGTH_POLICY_CHECKS_H_
