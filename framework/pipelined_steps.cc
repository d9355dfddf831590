#include "framework/pipelined_steps.h"

#include "framework/pipelined_chain.h"
#include "framework/pipelined_tree.h"

namespace speclab {

std::unique_ptr<PipelinedSteps> PipelinedForm(LanguageModel& target, Method& method, const SamplingParams& sampling,
                                              absl::Span<const int32_t> prompt, int max_new_tokens,
                                              at::Generator& draft_generator, at::Generator& verify_generator) {
  if (PipelinedChain::Supports(target, method, prompt, max_new_tokens))
    return std::make_unique<PipelinedChain>(target, method, sampling, prompt, draft_generator, verify_generator);
  if (PipelinedTree::Supports(method, prompt))
    return std::make_unique<PipelinedTree>(target, method, sampling, prompt, max_new_tokens, draft_generator,
                                           verify_generator);
  return nullptr;
}

}  // namespace speclab
