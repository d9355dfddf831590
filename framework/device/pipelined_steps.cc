#include "framework/device/pipelined_steps.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/device/device_tree_builder.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/device/pipelined_chain.h"
#include "framework/device/pipelined_tree.h"
#include "framework/target_features.h"
#include "framework/tree_builder.h"

namespace speclab {

PipelinedSteps::PipelinedSteps(DeviceModel& target, Method& method, const SamplingParams& sampling,
                               absl::Span<const int32_t> prompt, at::Generator& draft_generator,
                               at::Generator& verify_generator)
    : target_(target),
      method_(method),
      sampling_(sampling),
      draft_generator_(draft_generator),
      verify_generator_(verify_generator),
      features_request_(method.drafter->target_features()) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  const c10::Device device = target.model().device();
  last_two_ = LongsToDevice({prompt[n - 2], prompt[n - 1]}, device);
  positions_ = LongsToDevice({n - 2, n - 1}, device);
  // Writes reach at most a step's tokens past the last root, inside the cache's capacity.
  context_ = at::zeros({target.model().capacity() + kMaxStepTokens}, at::TensorOptions().dtype(at::kLong).device(device));
  context_.narrow(0, 0, n).copy_(LongsToDevice(std::vector<int64_t>(prompt.begin(), prompt.end()), device));
}

void PipelinedSteps::KeepPrefillFeatures(const TargetFeatures& prompt_features, int64_t prompt_length) {
  if (prompt_features.hidden.empty()) return;
  target_features_ = prompt_features;
  path_length_ = LongsToDevice({prompt_length - 1}, target().device());
}

absl::Status PipelinedSteps::KeepPathFeatures(const at::Tensor& path_length, const at::Tensor& rows) {
  if (!reads_target_features()) return absl::OkStatus();
  ASSIGN_OR_RETURN(target_features_, GatherFeatures(target(), features_request_, rows));
  path_length_ = path_length;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<DraftTree>> PipelinedSteps::DraftAt(int64_t min_root, int64_t max_root) {
  BuildRequest request{.root_token = -1, .sampling = method_.drafter_sampling.For(sampling_),
                       .policy = method_.policy.get(),
                       .generator = &draft_generator_, .device = target().device(),
                       .device_stop = method_.device_stop.get()};
  const DeviceRoot root{.last_two = last_two_,
                        .position = {.start = positions_.narrow(0, 0, 1), .max_start = max_root - 1,
                                     .min_start = min_root - 1},
                        .context = context_,
                        .target = target_features_,
                        .path_length = path_length_};
  DeviceTreeBuilder* builder = DeviceFormOf(*method_.tree_builder);
  if (builder == nullptr) return absl::InternalError("pipelined steps: the tree builder has no device form");  // Check()'s
  absl::StatusOr<DraftTree> draft = builder->BuildAt(*method_.drafter, request, root);
  if (draft.status().code() == absl::StatusCode::kUnimplemented) {
    Refuse(absl::StrCat("the tree builder '", method_.tree_builder_name, "' or the drafter '", method_.drafter_name,
                        "' cannot draft from a root on the device: ", draft.status().message()));
    return std::nullopt;
  }
  if (!draft.ok()) return draft.status();
  return *std::move(draft);
}

absl::StatusOr<DeviceRiders> PipelinedSteps::RidersOfStep() {
  DeviceDrafter* device = DeviceFormOf(*method_.drafter);
  if (device == nullptr) return DeviceRiders();
  return device->RidersAt();
}

absl::StatusOr<at::Tensor> PipelinedSteps::ForwardTreeWithRiders(const at::Tensor& tokens, const at::Tensor& depths,
                                                                 const at::Tensor& mask, const DevicePosition& at,
                                                                 const DeviceRiders& riders) {
  if (riders.size() == 0) return target_.ForwardTreeAt(tokens, depths, mask, at);
  ASSIGN_OR_RETURN(const TreeWithRiders in, AppendRiders(tokens, depths, mask, riders));
  ASSIGN_OR_RETURN(at::Tensor logits, target_.ForwardTreeAt(in.tokens, in.depths, in.mask, at));
  const int64_t n = tokens.size(0);
  RETURN_IF_ERROR(DeviceFormOf(*method_.drafter)->RidersScoredAt(logits.narrow(0, n, riders.size())));
  return logits.narrow(0, 0, n);
}

DevicePosition PipelinedSteps::RootAt(int64_t min_root, int64_t max_root) const {
  return {.start = positions_.narrow(0, 1, 1), .max_start = max_root, .min_start = min_root};
}

void PipelinedSteps::AdvanceTo(at::Tensor last_two, at::Tensor positions) {
  last_two_ = std::move(last_two);
  positions_ = std::move(positions);
}

std::vector<std::string> PartsWithoutDeviceForms(const Method& method, bool trees) {
  std::vector<std::string> parts;
  if (DeviceFormOf(*method.tree_builder) == nullptr)
    parts.push_back(absl::StrCat("the tree builder '", method.tree_builder_name,
                                 "' has no device form (framework/device/device_tree_builder.h)"));
  if (method.device_verifier == nullptr || (trees && !method.device_verifier->verifies_trees()))
    parts.push_back(WhyNoDeviceVerifier(method));
  if (method.policy->wants_progress() && method.device_stop == nullptr)
    parts.push_back(absl::StrCat("the length policy '", method.policy_name,
                                 "' reads each drafted token on the host to decide whether to go on (it has no "
                                 "device form: framework/device/device_length_stop.h)"));
  else if (method.policy->wants_progress() && method.device_verifier != nullptr &&
           !method.device_verifier->verifies_prefixes_alone())
    parts.push_back(absl::StrCat("the verifier '", method.verifier_name,
                                 "' weighs a chain's drafts together, so a chain drafted past the length policy '",
                                 method.policy_name, "''s device-side stop cannot be cut after verification"));
  else if (!method.policy->wants_progress() && !method.policy->length_is_fixed() &&
           !method.policy->may_observe_late())
    parts.push_back(absl::StrCat("the length policy '", method.policy_name,
                                 "' decides each step on the host after reading the last"));
  return parts;
}

std::string EngineForm::Describe() const {
  switch (kind) {
    case Kind::kPipelinedChain: return "pipelined chain";
    case Kind::kPipelinedTree: return "pipelined tree";
    case Kind::kStepByStep: break;
  }
  return "step by step: " + why_step_by_step;
}

EngineForm ChooseEngineForm(LanguageModel& target, const Method& method, const DecodeOptions& options) {
  auto step_by_step = [](std::string why) {
    return EngineForm{.kind = EngineForm::Kind::kStepByStep, .why_step_by_step = std::move(why)};
  };
  if (!options.pipeline) return step_by_step("decoding.pipeline is off (its default off CUDA)");
  if (options.time_phases) return step_by_step("phases are timed, which waits for each");
  if (!options.verify_on_device) return step_by_step("decoding.verify_on_device is off");
  if (DeviceFormOf(target) == nullptr)
    return step_by_step("the target model has no device form (framework/device/device_model.h)");
  const bool trees = method.tree_builder->traits().may_branch;
  if (const std::vector<std::string> parts = PartsWithoutDeviceForms(method, trees); !parts.empty())
    return step_by_step(absl::StrJoin(parts, "; "));
  return {.kind = trees ? EngineForm::Kind::kPipelinedTree : EngineForm::Kind::kPipelinedChain};
}

absl::StatusOr<std::unique_ptr<PipelinedSteps>> PipelinedForm(const EngineForm& form, LanguageModel& target,
                                                              Method& method, const SamplingParams& sampling,
                                                              absl::Span<const int32_t> prompt,
                                                              const TargetFeatures& prompt_features, int max_new_tokens,
                                                              at::Generator& draft_generator,
                                                              at::Generator& verify_generator) {
  DeviceModel* device = DeviceFormOf(target);
  if (!form.pipelined() || device == nullptr) return absl::FailedPreconditionError(form.why_step_by_step);
  if (form.kind == EngineForm::Kind::kPipelinedTree) {
    RETURN_IF_ERROR(PipelinedTree::Check(prompt));
    auto tree = std::make_unique<PipelinedTree>(*device, method, sampling, prompt, max_new_tokens, draft_generator,
                                                verify_generator);
    tree->KeepPrefillFeatures(prompt_features, static_cast<int64_t>(prompt.size()));
    return std::unique_ptr<PipelinedSteps>(std::move(tree));
  }
  RETURN_IF_ERROR(PipelinedChain::Check(target, method, prompt, max_new_tokens));  // the cache's room
  auto chain = std::make_unique<PipelinedChain>(*device, method, sampling, prompt, draft_generator, verify_generator);
  chain->KeepPrefillFeatures(prompt_features, static_cast<int64_t>(prompt.size()));
  return std::unique_ptr<PipelinedSteps>(std::move(chain));
}

}  // namespace speclab
