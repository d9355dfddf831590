#include "framework/speculative_decoder.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "framework/core/random_source.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/device/device_drafter.h"
#include "framework/device/device_graphs.h"
#include "framework/device/pipelined_steps.h"
#include "framework/error_text.h"
#include "framework/step_by_step.h"

namespace speclab {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Feeds prompt[0..n-2] as one causal chain and commits it: the last prompt
// token becomes the first root.
absl::Status Prefill(LanguageModel& model, absl::Span<const int32_t> prompt) {
  RETURN_IF_ERROR(model.Truncate(0));
  const int64_t n = static_cast<int64_t>(prompt.size()) - 1;
  if (n == 0) return absl::OkStatus();
  std::vector<int64_t> tokens(prompt.begin(), prompt.end() - 1), positions(n), slots(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = slots[i] = i;
  const c10::Device device = model.device();
  ASSIGN_OR_RETURN(at::Tensor logits, model.Forward(LongsToDevice(tokens, device), LongsToDevice(positions, device),
                                                    /*mask=*/at::Tensor()));  // a causal chain
  return model.Commit(slots);
}

// Appends `emitted` to the output, stopping at EOS or the token budget.
// Returns true when generation is over.
bool Emit(const std::vector<int32_t>& emitted, const DecodeOptions& options, Generation& out) {
  for (int32_t token : emitted) {
    out.tokens.push_back(token);
    if (token == options.eos_token || static_cast<int>(out.tokens.size()) >= options.max_new_tokens) return true;
  }
  return false;
}

// Leaves the cache holding the prompt and every emitted token but the last:
// as if no forward had run ahead (autoregressive and pipelined decoding) and
// no step had been cut short by the budget.
absl::Status KeepEmitted(LanguageModel& target, absl::Span<const int32_t> prompt, const Generation& out) {
  const int64_t fed = static_cast<int64_t>(prompt.size() + out.tokens.size()) - 1;
  return target.committed_length() > fed ? target.Truncate(fed) : absl::OkStatus();
}

void ResetForwardCounts(LanguageModel& target, Drafter* drafter) {
  target.ResetForwardCounts();
  if (drafter == nullptr) return;
  for (LanguageModel* model : drafter->models()) model->ResetForwardCounts();
  if (DeviceGraphs* graphs = DraftGraphsOf(*drafter)) graphs->ResetRuns();
}

void CollectForwardCounts(const LanguageModel& target, Drafter* drafter, Generation& out) {
  out.target_forwards = target.forward_counts();
  if (drafter == nullptr) return;
  for (LanguageModel* model : drafter->models()) {
    out.draft_forwards_by_model.push_back(model->forward_counts());
    for (const auto& [tokens, count] : model->forward_counts()) out.draft_forwards[tokens] += count;
  }
  if (DeviceGraphs* graphs = DraftGraphsOf(*drafter)) out.draft_graph_runs = graphs->runs();
}

absl::StatusOr<Generation> AutoregressiveImpl(LanguageModel& target, absl::Span<const int32_t> prompt,
                                              const DecodeOptions& options) {
  c10::InferenceMode inference;
  RETURN_IF_ERROR(options.sampling.Validate());
  RETURN_IF_ERROR(CheckCapacity(target, prompt, options.max_new_tokens + 1));
  const c10::Device device = target.device();
  at::Generator generator = MakeGenerator(device, options.seed);
  Generation out;
  auto start = MarkPhase(device, true);
  RETURN_IF_ERROR(Prefill(target, prompt));
  auto decode_start = MarkPhase(device, true);
  out.prefill_seconds = Seconds(start, decode_start);
  ResetForwardCounts(target, nullptr);
  // The host reads each token one step late: the next forward is queued
  // (from the token still on the device) before the last token is read, so
  // the device never waits for the host's bookkeeping and launches. The one
  // forward past the end, when generation stops at EOS, is rolled back below.
  at::Tensor token = LongsToDevice({prompt.back()}, device);
  std::optional<AsyncRead> unread;  // the newest sampled token
  int queued = 0;
  bool done = false;
  while (!done) {
    auto step_start = Clock::now();
    std::optional<AsyncRead> next;
    if (queued < options.max_new_tokens) {
      const int64_t position = target.committed_length();
      ASSIGN_OR_RETURN(at::Tensor logits, target.Forward(token, at::full({1}, position, token.options()), at::Tensor()));
      RETURN_IF_ERROR(target.Commit({0}));
      token = options.sampling.greedy() ? GreedyTokens(logits) : SampleRows(Probabilities(logits, options.sampling), generator);
      next = AsyncRead::Start(token);
      ++queued;
    }
    if (!unread && !next) break;  // nothing queued, nothing to read: a zero budget
    if (unread) {
      done = Emit({static_cast<int32_t>(unread->Wait().data_ptr<int64_t>()[0])}, options, out);
      out.steps.push_back({.verify_seconds = Seconds(step_start, Clock::now())});
    }
    unread = std::move(next);
  }
  RETURN_IF_ERROR(KeepEmitted(target, prompt, out));
  out.engine_form = "autoregressive";
  out.decode_seconds = Seconds(decode_start, MarkPhase(device, true));
  CollectForwardCounts(target, nullptr, out);
  return out;
}

// Pipelined steps (framework/device/pipelined_steps.h): the host reads step k back
// while the device runs step k + 1; the one step queued past the end is
// dropped. Each generator draws what it draws step by step, in the same
// order, so the tokens are those of the step-by-step loop (up to the
// rounding of forwards that differ in shape, which only moves drafts: the
// verifier keeps the law). Returns false, having changed nothing, where the
// method's builder or drafter cannot draft from a device root.
absl::StatusOr<bool> DecodePipelined(PipelinedSteps& steps, Method& method, absl::Span<const int32_t> prompt,
                                     const DecodeOptions& options, Generation& out) {
  int64_t root = static_cast<int64_t>(prompt.size()) - 1;  // position of the oldest unread step's root
  ASSIGN_OR_RETURN(std::optional<at::Tensor> first, steps.Queue(root, root));
  if (!first) return false;
  std::deque<AsyncRead> unread;
  unread.push_back(AsyncRead::Start(*first));
  for (bool done = false; !done;) {
    // The host's time a step, in three parts (StepStats): queuing the next
    // step, waiting for the oldest one's verdict, and reading it. Where the
    // wait is near zero, the host, not the device, sets the pace.
    auto step_start = Clock::now();
    // The next step, unless the unread one surely ends generation (it emits at least one token).
    if (static_cast<int>(out.tokens.size()) + 1 < options.max_new_tokens) {
      ASSIGN_OR_RETURN(std::optional<at::Tensor> next, steps.Queue(root + 1, root + steps.max_advance()));
      if (!next) return absl::InternalError("pipelined decoding: the builder stopped drafting from device roots");
      unread.push_back(AsyncRead::Start(*next));
    }
    auto queued = Clock::now();
    const at::Tensor record = unread.front().Wait();
    auto verdict = Clock::now();
    ASSIGN_OR_RETURN(PipelinedRead read, steps.Read(record));
    unread.pop_front();
    done = Emit(read.emitted, options, out);
    root += static_cast<int64_t>(read.emitted.size());
    auto step_end = Clock::now();
    StepStats stats{.tree_nodes = read.tree_nodes, .longest_path = read.longest_path,
                    .accepted = static_cast<int>(read.emitted.size()) - 1,
                    .draft_seconds = Seconds(step_start, queued), .verify_seconds = Seconds(queued, verdict),
                    .other_seconds = Seconds(verdict, step_end)};
    method.policy->Observe({.drafted = stats.longest_path, .accepted = stats.accepted,
                            .tree_nodes = stats.tree_nodes, .step_seconds = Seconds(step_start, step_end)});
    out.steps.push_back(stats);
  }
  return true;  // the caller trims the cache (KeepEmitted)
}

// The target features of the prefill (every prompt token but the last).
absl::StatusOr<TargetFeatures> PrefillFeatures(const LanguageModel& target, const TargetFeatureRequest& request,
                                               absl::Span<const int32_t> prompt) {
  if (request.empty()) return TargetFeatures();
  if (prompt.size() > 1) return GatherFeatures(target, request, at::Tensor());
  TargetFeatures none;  // the prefill fed nothing
  for (size_t i = 0; i < request.hidden_layers.size(); ++i)
    none.hidden.push_back(at::empty({0, target.config().hidden_size}, at::TensorOptions().device(target.device())));
  return none;
}

absl::StatusOr<Generation> SpeculativeImpl(LanguageModel& target, Method& method, absl::Span<const int32_t> prompt,
                                           const DecodeOptions& options) {
  c10::InferenceMode inference;
  RETURN_IF_ERROR(options.sampling.Validate());
  RETURN_IF_ERROR(method.CheckCompatible());
  const c10::Device device = target.device();
  // Drafting and verification draw from independent streams (docs/algorithms.md §1.3.5).
  constexpr uint64_t kVerifySalt = 0x9E3779B97F4A7C15ULL;
  Randomness random{.draft = MakeGenerator(device, options.seed),
                    .verify_host = SeededRandomSource(options.seed ^ kVerifySalt),
                    .verify = MakeGenerator(device, options.seed ^ kVerifySalt)};
  const TargetFeatureRequest features = method.drafter->target_features();
  RETURN_IF_ERROR(target.KeepHiddenStates(features.hidden_layers));  // a no-op after an experiment's load

  Generation out;
  auto start = MarkPhase(device, true);
  RETURN_IF_ERROR(Prefill(target, prompt));
  ASSIGN_OR_RETURN(TargetFeatures prompt_features, PrefillFeatures(target, features, prompt));
  RETURN_IF_ERROR(method.drafter->Reset(prompt, prompt_features));
  method.policy->Reset();
  auto decode_start = MarkPhase(device, true);
  out.prefill_seconds = Seconds(start, decode_start);
  ResetForwardCounts(target, method.drafter.get());

  // The pipelined form where the method and the options allow it.
  bool done = false;
  const EngineForm form = ChooseEngineForm(target, method, options);
  std::string step_by_step_reason = form.why_step_by_step;
  if (form.pipelined()) {
    absl::StatusOr<std::unique_ptr<PipelinedSteps>> steps = PipelinedForm(
        form, target, method, options.sampling, prompt, prompt_features, options.max_new_tokens, random.draft,
        random.verify);
    if (steps.ok()) {
      ASSIGN_OR_RETURN(done, DecodePipelined(**steps, method, prompt, options, out));
      if (done) out.engine_form = (*steps)->form();
      if (done && !method.policy->length_is_fixed() && method.policy->may_observe_late())
        absl::StrAppend(&out.engine_form, "; the length policy '", method.policy_name,
                        "' observes each step one step late");
      // At temperature 0 a sampling tree builder drafts top-k, and the rule's
      // device form matches greedily (as StepByStep notes).
      if (done && options.sampling.greedy() && method.lossless() &&
          method.verifier->traits().needs_draft_distributions && method.tree_builder->traits().may_branch &&
          method.tree_builder->traits().samples_tokens)
        absl::StrAppend(&out.engine_form, "; ", GreedyStandInNote(method));
      // A tree refused at its first step was drafted (PipelinedTree::Queue):
      // the step-by-step loop counts its own forwards only.
      if (!done) ResetForwardCounts(target, method.drafter.get());
      step_by_step_reason = (*steps)->refusal();
    } else {
      step_by_step_reason = std::string(steps.status().message());
    }
  }

  // Otherwise step by step: draft, score, verify, commit, adapt.
  if (!done) out.engine_form = "step by step: " + step_by_step_reason;
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  StepByStep engine(target, method, options, random);
  while (!done) {
    ASSIGN_OR_RETURN(StepByStep::Step step, engine.Draft(context));
    RETURN_IF_ERROR(engine.Score(step));
    RETURN_IF_ERROR(engine.Verify(step));
    RETURN_IF_ERROR(engine.Commit(step));
    context.insert(context.end(), step.emitted.begin(), step.emitted.end());
    done = Emit(step.emitted, options, out);
    out.steps.push_back(engine.Adapt(step));
  }
  RETURN_IF_ERROR(engine.Finish());
  if (!engine.rule_note().empty()) absl::StrAppend(&out.engine_form, "; ", engine.rule_note());
  RETURN_IF_ERROR(KeepEmitted(target, prompt, out));
  out.decode_seconds = Seconds(decode_start, MarkPhase(device, true));
  CollectForwardCounts(target, method.drafter.get(), out);
  return out;
}

}  // namespace

// LibTorch reports errors by throwing c10::Error; none may leave the framework.
absl::StatusOr<Generation> GenerateAutoregressive(LanguageModel& target, absl::Span<const int32_t> prompt,
                                                  const DecodeOptions& options) {
  try {
    return AutoregressiveImpl(target, prompt, options);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("autoregressive decoding failed: ", ErrorText(e)));
  }
}

absl::StatusOr<Generation> GenerateSpeculative(LanguageModel& target, Method& method,
                                               absl::Span<const int32_t> prompt, const DecodeOptions& options) {
  try {
    return SpeculativeImpl(target, method, prompt, options);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("method '", method.name, "' failed: ", ErrorText(e)));
  }
}

}  // namespace speclab
