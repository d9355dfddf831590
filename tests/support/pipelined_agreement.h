// The check that a drafter's pipelined form drafts what its step-by-step
// form does: the same tokens, the same drafts accepted at every step.
#ifndef SPECLAB_TESTS_SUPPORT_PIPELINED_AGREEMENT_H_
#define SPECLAB_TESTS_SUPPORT_PIPELINED_AGREEMENT_H_

#include <array>
#include <string>
#include <vector>

#include "framework/method.h"
#include "framework/model/llama_model.h"

namespace speclab::testing {

// What the step-by-step run accepted: drafts in all, and steps that
// rejected one, so that callers can check the comparison saw both.
struct StepAgreement {
  int accepted = 0;
  int rejected = 0;
};

// Decodes `prompt` with `method` at T = 0 pipelined (expecting an engine form
// containing `form`) and step by step, and expects the same tokens and the
// same number of drafts accepted at every step.
StepAgreement ExpectPipelinedAsStepByStep(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt,
                                          int max_new_tokens, const std::string& form);

// A drafter's exactness at T = 0, the two checks every drafter test makes:
// pipelined as step by step over 40 tokens (some drafts accepted, so that the
// comparison sees them), and 24 tokens equal to greedy decoding's.
void ExpectGreedyPipelinedAndStepByStep(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt);

// For drafters that learn across generations: decodes `prompt` twice at T =
// 0 with `method` (pipelined or step by step), expecting greedy decoding's
// tokens each time and, where `pipeline`, a pipelined engine; `where` names
// the case in failures. Returns the drafts accepted in each run (the second
// drafts from the first's output).
std::array<int, 2> AcceptedInTwoRuns(LlamaModel& target, Method& method, const std::vector<int32_t>& prompt,
                                     int max_new_tokens, bool pipeline, const std::string& where);

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_PIPELINED_AGREEMENT_H_
