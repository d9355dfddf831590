// What the engine's prefill hands a drafter that reads target features
// (framework/target_features.h), for tests that drive such a drafter by hand.
#ifndef SPECLAB_TESTS_SUPPORT_PROMPT_FEATURES_H_
#define SPECLAB_TESTS_SUPPORT_PROMPT_FEATURES_H_

#include <cstdint>
#include <vector>

#include "framework/model/llama_model.h"
#include "framework/target_features.h"

namespace speclab::testing {

// The target's hidden states `layers` (the final norm's output by default)
// of prompt[0..n-2] (the prefill's rows: every prompt token but the last);
// truncates the target's cache first.
TargetFeatures PromptFeatures(LlamaModel& target, const std::vector<int32_t>& prompt,
                              const std::vector<int>& layers = {-1});

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_PROMPT_FEATURES_H_
