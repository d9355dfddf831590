#include "framework/device/pipelined_chain.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_tree_builder.h"
#include "framework/device/device_verifier.h"
#include "framework/sampling.h"
#include "framework/tree_builder.h"

namespace speclab {

absl::Status PipelinedChain::Check(const LanguageModel& target, const Method& method,
                                   absl::Span<const int32_t> prompt, int max_new_tokens) {
  if (prompt.size() < 2) return absl::FailedPreconditionError("the prompt has fewer than two tokens");
  const int64_t step = method.policy->MaxDraftLength() + 1;
  const int64_t needed = static_cast<int64_t>(prompt.size()) + max_new_tokens + 2 * step;
  if (needed > target.capacity())
    return absl::FailedPreconditionError(absl::StrCat("a queued step needs ", needed, " KV slots, past the capacity ",
                                                      target.capacity(), " (models.kv_capacity)"));
  return absl::OkStatus();
}

PipelinedChain::PipelinedChain(DeviceModel& target, Method& method, const SamplingParams& sampling,
                               absl::Span<const int32_t> prompt, at::Generator& draft_generator,
                               at::Generator& verify_generator)
    : PipelinedSteps(target, method, sampling, prompt, draft_generator, verify_generator),
      gamma_(method.policy->MaxDraftLength()) {}

absl::StatusOr<std::optional<at::Tensor>> PipelinedChain::Queue(int64_t min_root, int64_t max_root) {
  const c10::Device device = target().device();
  ASSIGN_OR_RETURN(std::optional<DraftTree> draft, DraftAt(min_root, max_root));
  if (!draft) return std::nullopt;  // DraftAt said why
  if (draft->tokens.size(0) != gamma_ + 1)
    return absl::InternalError(
        absl::StrCat("pipelined chain: drafted ", draft->tokens.size(0) - 1, " tokens, not ", gamma_));
  const at::Tensor tokens = draft->tokens.to(device);
  ASSIGN_OR_RETURN(at::Tensor logits, target_device().ForwardAt(tokens, RootAt(min_root, max_root)));

  DeviceChainProblem problem{.tokens = tokens, .target_probs = TargetRows(logits, sampling()),
                             .draft_probs = draft->draft_probs.defined() ? draft->draft_probs.to(device) : at::Tensor(),
                             .greedy = sampling().greedy()};
  ASSIGN_OR_RETURN(at::Tensor answer, method().device_verifier->Verify(problem, verify_generator()));
  // The next step's root is the extra token, after the last accepted token.
  const at::Tensor accepted = answer.narrow(0, 0, 1);
  RETURN_IF_ERROR(KeepPathFeatures(accepted + 1));  // the root and the accepted drafts
  AdvanceTo(at::cat({tokens.index_select(0, accepted), answer.narrow(0, 1, 1)}), (positions() + accepted).add_(1));
  return at::cat({tokens, answer});
}

absl::StatusOr<PipelinedRead> PipelinedChain::Read(const at::Tensor& host_record) const {
  const int64_t* data = host_record.data_ptr<int64_t>();
  const int64_t accepted = data[gamma_ + 1];
  if (accepted < 0 || accepted > gamma_)
    return absl::InternalError(absl::StrCat("device verifier accepted ", accepted, " of ", gamma_, " drafts"));
  PipelinedRead read{.emitted = std::vector<int32_t>(data + 1, data + 1 + accepted), .tree_nodes = gamma_,
                     .longest_path = gamma_};
  read.emitted.push_back(static_cast<int32_t>(data[gamma_ + 2]));
  return read;
}

}  // namespace speclab
