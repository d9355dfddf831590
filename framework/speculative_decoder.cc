#include "framework/speculative_decoder.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "framework/core/random_source.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/device/device_verifier.h"
#include "framework/device/pipelined_steps.h"

namespace speclab {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Phase boundary: on CUDA, optionally wait for queued work so that each
// phase's time is its own rather than the next host wait's.
Clock::time_point Mark(c10::Device device, bool synchronize) {
  if (synchronize && device.is_cuda()) torch::cuda::synchronize(device.index());
  return Clock::now();
}

absl::Status CheckCapacity(const LanguageModel& model, absl::Span<const int32_t> prompt, int extra) {
  if (prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  const int64_t need = static_cast<int64_t>(prompt.size()) + extra;
  if (need > model.capacity())
    return absl::ResourceExhaustedError(absl::StrCat("prompt (", prompt.size(), " tokens) + max_new_tokens + draft tree needs ",
                                                     need, " KV slots; the model was loaded with kv_capacity ",
                                                     model.capacity(), " (raise models.kv_capacity)"));
  return absl::OkStatus();
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

// Host copies of what the verifier reads, fetched with a single transfer.
struct HostView {
  std::vector<int32_t> tokens;
  std::vector<int32_t> argmax;
  std::vector<int64_t> parents;  // a device-shaped draft's (DraftTree::DeviceShape)
  ProbabilityRows target;
  ProbabilityRows draft;
};

HostView FetchForVerification(const at::Tensor& tokens, const at::Tensor& probs, const at::Tensor& draft_probs,
                              bool sampled, bool want_rows, bool greedy, const at::Tensor& parents) {
  const int64_t n = tokens.size(0), vocab = probs.size(1);
  // Token ids are exact in float32 (< 2^24), so one packed float buffer carries everything.
  std::vector<at::Tensor> parts{tokens.to(probs.device(), at::kFloat), GreedyTokens(probs).to(at::kFloat)};
  if (parents.defined()) parts.push_back(parents.to(probs.device(), at::kFloat));
  const bool rows = want_rows && !greedy;
  const bool draft_rows = rows && draft_probs.defined();
  if (rows) parts.push_back(probs.reshape({-1}));
  if (draft_rows) parts.push_back(draft_probs.to(probs.device(), at::kFloat).reshape({-1}));
  at::Tensor host = at::cat(parts).to(at::kCPU).contiguous();  // the step's one synchronisation
  const float* data = host.data_ptr<float>();
  HostView view;
  view.tokens.assign(data, data + n);
  view.argmax.assign(data + n, data + 2 * n);
  if (parents.defined()) view.parents.assign(data + 2 * n, data + 3 * n);
  const int64_t rows_at = parents.defined() ? 3 * n : 2 * n;
  auto copy_rows = [&](ProbabilityRows& dst, const float* src) {
    dst = ProbabilityRows(static_cast<int>(n), static_cast<int>(vocab));
    std::copy(src, src + n * vocab, dst.data().begin());
  };
  if (rows) copy_rows(view.target, data + rows_at);
  if (draft_rows) copy_rows(view.draft, data + rows_at + n * vocab);
  if (greedy && want_rows) {
    // Temperature 0: p and q are one-hot; build them here instead of copying.
    view.target = ProbabilityRows(static_cast<int>(n), static_cast<int>(vocab));
    for (int64_t i = 0; i < n; ++i) view.target.mutable_row(i)[view.argmax[i]] = 1.0;
    if (sampled) {
      view.draft = ProbabilityRows(static_cast<int>(n), static_cast<int>(vocab));
      for (int64_t i = 1; i < n; ++i) view.draft.mutable_row(i)[view.tokens[i]] = 1.0;
    }
  }
  return view;
}

void ResetForwardCounts(LanguageModel& target, Drafter* drafter) {
  target.ResetForwardCounts();
  if (drafter != nullptr)
    for (LanguageModel* model : drafter->models()) model->ResetForwardCounts();
}

void CollectForwardCounts(const LanguageModel& target, Drafter* drafter, Generation& out) {
  out.target_forwards = target.forward_counts();
  if (drafter == nullptr) return;
  for (LanguageModel* model : drafter->models())
    for (const auto& [tokens, count] : model->forward_counts()) out.draft_forwards[tokens] += count;
}

// Verifies a chain with the verifier's device form: one transfer brings back
// the drafted tokens, the number accepted and the extra token.
absl::StatusOr<Verdict> VerifyChainOnDevice(const DeviceVerifier& verifier, TokenTree& tree,
                                            const at::Tensor& tokens, const at::Tensor& probs,
                                            const at::Tensor& draft_probs, bool greedy, at::Generator& generator) {
  DeviceChainProblem problem{.tokens = tokens.to(probs.device()), .target_probs = probs,
                             .draft_probs = draft_probs.defined() ? draft_probs.to(probs.device()) : at::Tensor(),
                             .greedy = greedy};
  ASSIGN_OR_RETURN(at::Tensor answer, verifier.Verify(problem, generator));
  const at::Tensor host = at::cat({problem.tokens, answer}).to(at::kCPU);  // the step's one synchronisation
  const int64_t* data = host.data_ptr<int64_t>();
  const int n = tree.size();
  for (int i = 1; i < n; ++i) tree.set_token(i, static_cast<int32_t>(data[i]));
  const int64_t accepted = data[n];
  if (accepted < 0 || accepted >= n)
    return absl::InternalError(absl::StrCat("device verifier accepted ", accepted, " of ", n - 1, " drafts"));
  Verdict verdict;
  for (int i = 1; i <= accepted; ++i) verdict.accepted.push_back(i);
  verdict.extra_token = static_cast<int32_t>(data[n + 1]);
  return verdict;
}

bool IsChain(const TokenTree& tree) { return tree.max_depth() == tree.size() - 1; }

// Verifies a tree with the verifier's device form: one transfer brings back
// the drafted tokens, the parents of a device-shaped draft, and the walk's
// answer (the accepted path and the extra token).
absl::StatusOr<Verdict> VerifyTreeOnDevice(const DeviceVerifier& verifier, DraftTree& draft, const at::Tensor& probs,
                                           bool greedy, at::Generator& generator) {
  const c10::Device device = probs.device();
  const int64_t n = DraftSize(draft);
  std::vector<int64_t> host_parents;
  at::Tensor parents;
  if (draft.device_shape) {
    parents = draft.device_shape->parents.to(device);
  } else {
    for (int i = 0; i < draft.tree.size(); ++i) host_parents.push_back(draft.tree.parent(i));
    parents = LongsToDevice(host_parents, device);
  }
  DeviceTreeProblem problem{.tokens = draft.tokens.to(device), .parents = parents, .target_probs = probs,
                            .greedy = greedy};
  ASSIGN_OR_RETURN(at::Tensor answer, verifier.VerifyTree(problem, generator));
  const at::Tensor host = at::cat({problem.tokens, parents, answer}).to(at::kCPU);  // the step's one synchronisation
  const int64_t* data = host.data_ptr<int64_t>();
  const std::vector<int32_t> tokens(data, data + n);
  if (draft.device_shape) RETURN_IF_ERROR(AdoptShape(draft, absl::MakeConstSpan(data + n, n), tokens));
  for (int i = 1; i < n; ++i) draft.tree.set_token(i, tokens[i]);
  const int64_t* walk = data + 2 * n;
  if (walk[0] < 0 || walk[0] >= n)
    return absl::InternalError(absl::StrCat("device verifier accepted ", walk[0], " of ", n - 1, " drafts"));
  Verdict verdict;
  for (int64_t i = 1; i <= walk[0]; ++i) verdict.accepted.push_back(static_cast<int>(walk[i]));
  verdict.extra_token = static_cast<int32_t>(walk[n]);
  return verdict;
}

absl::Status CheckPath(const TokenTree& tree, const Verdict& verdict) {
  int parent = 0;
  for (int node : verdict.accepted) {
    if (node <= 0 || node >= tree.size() || tree.parent(node) != parent)
      return absl::InternalError(absl::StrCat("verifier returned node ", node, ", not a child of node ", parent));
    parent = node;
  }
  if (verdict.extra_token < 0) return absl::InternalError("verifier returned no extra token");
  return absl::OkStatus();
}

absl::StatusOr<Generation> AutoregressiveImpl(LanguageModel& target, absl::Span<const int32_t> prompt,
                                              const DecodeOptions& options) {
  c10::InferenceMode inference;
  RETURN_IF_ERROR(options.sampling.Validate());
  RETURN_IF_ERROR(CheckCapacity(target, prompt, options.max_new_tokens + 1));
  const c10::Device device = target.device();
  at::Generator generator = MakeGenerator(device, options.seed);
  Generation out;
  auto start = Mark(device, true);
  RETURN_IF_ERROR(Prefill(target, prompt));
  auto decode_start = Mark(device, true);
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
  out.decode_seconds = Seconds(decode_start, Mark(device, true));
  CollectForwardCounts(target, nullptr, out);
  return out;
}

// The random streams of a speculative generation.
struct Randomness {
  at::Generator draft;   // drafting (never the verifier's, docs/algorithms.md §1.3.5)
  SeededRandomSource verify_host;
  at::Generator verify;  // device verifiers
};

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
    auto step_start = Clock::now();
    // The next step, unless the unread one surely ends generation (it emits at least one token).
    if (static_cast<int>(out.tokens.size()) + 1 < options.max_new_tokens) {
      ASSIGN_OR_RETURN(std::optional<at::Tensor> next, steps.Queue(root + 1, root + steps.max_advance()));
      if (!next) return absl::InternalError("pipelined decoding: the builder stopped drafting from device roots");
      unread.push_back(AsyncRead::Start(*next));
    }
    ASSIGN_OR_RETURN(PipelinedRead read, steps.Read(unread.front().Wait()));
    unread.pop_front();
    done = Emit(read.emitted, options, out);
    root += static_cast<int64_t>(read.emitted.size());
    StepStats stats{.tree_nodes = read.tree_nodes, .longest_path = read.longest_path,
                    .accepted = static_cast<int>(read.emitted.size()) - 1,
                    .verify_seconds = Seconds(step_start, Clock::now())};
    method.policy->Observe({.drafted = stats.longest_path, .accepted = stats.accepted,
                            .tree_nodes = stats.tree_nodes, .step_seconds = stats.verify_seconds});
    out.steps.push_back(stats);
  }
  return true;  // the caller trims the cache (KeepEmitted)
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
  const DeviceVerifier* device_verifier = options.verify_on_device ? method.device_verifier.get() : nullptr;
  const bool sync = options.time_phases;
  const bool want_rows = method.verifier->traits().needs_target_rows;

  Generation out;
  auto start = Mark(device, true);
  RETURN_IF_ERROR(Prefill(target, prompt));
  RETURN_IF_ERROR(method.drafter->Reset(prompt));
  method.policy->Reset();
  auto decode_start = Mark(device, true);
  out.prefill_seconds = Seconds(start, decode_start);
  ResetForwardCounts(target, method.drafter.get());

  bool done = false;
  std::string step_by_step_reason = !options.pipeline          ? "decoding.pipeline is off (its default off CUDA)"
                                    : options.time_phases       ? "phases are timed, which waits for each"
                                    : !options.verify_on_device ? "decoding.verify_on_device is off"
                                                                : "";
  if (step_by_step_reason.empty()) {
    absl::StatusOr<std::unique_ptr<PipelinedSteps>> steps = PipelinedForm(
        target, method, options.sampling, prompt, options.max_new_tokens, random.draft, random.verify);
    if (steps.ok()) {
      ASSIGN_OR_RETURN(done, DecodePipelined(**steps, method, prompt, options, out));
      if (done) out.engine_form = (*steps)->form();
      // A tree refused at its first step was drafted (PipelinedTree::Queue):
      // the step-by-step loop counts its own forwards only.
      if (!done) ResetForwardCounts(target, method.drafter.get());
      step_by_step_reason = (*steps)->refusal();
    } else {
      step_by_step_reason = std::string(steps.status().message());
    }
  }
  if (!done) out.engine_form = "step by step: " + step_by_step_reason;
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  // The target's commit of a step's accepted path waits until the next
  // step's draft is queued: the drafter's work (a CUDA graph, for model
  // drafters) then starts on the device at once, and the host prepares the
  // compaction while it runs instead of while the device idles. Not where
  // the drafter runs the target itself: it must see the committed cache.
  const std::vector<LanguageModel*> drafter_models = method.drafter->models();
  const bool defer_commit =
      std::find(drafter_models.begin(), drafter_models.end(), &target) == drafter_models.end();
  std::optional<std::vector<int64_t>> pending_commit;
  while (!done) {
    StepStats stats;
    auto t0 = Clock::now();
    RETURN_IF_ERROR(method.drafter->BeginStep(context));
    BuildRequest request{.root_token = context.back(), .sampling = method.drafter_sampling.For(options.sampling),
                         .policy = method.policy.get(), .generator = &random.draft, .device = device};
    ASSIGN_OR_RETURN(DraftTree draft, method.tree_builder->Build(*method.drafter, request));
    TokenTree& tree = draft.tree;
    const int n = static_cast<int>(DraftSize(draft));
    RETURN_IF_ERROR(CheckCapacity(target, context, options.max_new_tokens + n));
    auto t1 = Mark(device, sync);
    if (pending_commit) {
      RETURN_IF_ERROR(target.Commit(*pending_commit));
      pending_commit.reset();
    }

    // One target forward over the whole tree, on top of the committed cache.
    // A shape chosen on the device goes to the forward without a read.
    const std::optional<DraftTree::DeviceShape> shape = draft.device_shape;
    const at::Tensor positions = shape ? shape->depths.to(device) + target.committed_length()
                                       : LongsToDevice(tree.Positions(target.committed_length()), device);
    const at::Tensor mask = shape          ? shape->mask.to(device)
                            : IsChain(tree) ? at::Tensor()
                                            : MaskToDevice(tree.AncestorMask(), n, n, device);
    ASSIGN_OR_RETURN(at::Tensor logits, target.Forward(draft.tokens.to(device), positions, mask));
    const at::Tensor target_rows = TargetRows(logits, options.sampling);
    Verdict verdict;
    if (device_verifier != nullptr && !shape && IsChain(tree) && !method.tree_builder->traits().may_branch) {
      ASSIGN_OR_RETURN(verdict, VerifyChainOnDevice(*device_verifier, tree, draft.tokens, target_rows,
                                                    draft.draft_probs, options.sampling.greedy(), random.verify));
    } else if (device_verifier != nullptr && device_verifier->verifies_trees()) {
      ASSIGN_OR_RETURN(verdict, VerifyTreeOnDevice(*device_verifier, draft, target_rows, options.sampling.greedy(),
                                                   random.verify));
    } else {
      HostView host = FetchForVerification(draft.tokens, target_rows, draft.draft_probs,
                                           draft.sampling != DraftSampling::kDeterministic, want_rows,
                                           options.sampling.greedy(), shape ? shape->parents : at::Tensor());
      if (shape) RETURN_IF_ERROR(AdoptShape(draft, host.parents, host.tokens));
      for (int i = 1; i < n; ++i) tree.set_token(i, host.tokens[i]);
      VerificationProblem problem{.tree = &tree, .target = std::move(host.target),
                                  .target_argmax = std::move(host.argmax), .draft = std::move(host.draft),
                                  .sampling = draft.sampling};
      ASSIGN_OR_RETURN(verdict, method.verifier->Verify(problem, random.verify_host));
    }
    RETURN_IF_ERROR(CheckPath(tree, verdict));
    auto t2 = Clock::now();

    std::vector<int64_t> keep{0};
    std::vector<int> path{0};
    std::vector<int32_t> emitted;
    for (int node : verdict.accepted) {
      keep.push_back(node);
      path.push_back(node);
      emitted.push_back(tree.token(node));
    }
    emitted.push_back(verdict.extra_token);
    if (defer_commit) {
      pending_commit = std::move(keep);
    } else {
      RETURN_IF_ERROR(target.Commit(keep));
    }
    RETURN_IF_ERROR(method.drafter->EndStep(tree, path));
    context.insert(context.end(), emitted.begin(), emitted.end());
    done = Emit(emitted, options, out);
    stats.tree_nodes = n - 1;
    stats.longest_path = tree.max_depth();
    stats.accepted = static_cast<int>(verdict.accepted.size());
    auto t3 = Mark(device, sync);
    stats.draft_seconds = Seconds(t0, t1);
    stats.verify_seconds = Seconds(t1, t2);
    stats.other_seconds = Seconds(t2, t3);
    method.policy->Observe({.drafted = stats.longest_path, .accepted = stats.accepted,
                            .tree_nodes = stats.tree_nodes, .step_seconds = Seconds(t0, t3)});
    out.steps.push_back(stats);
  }
  if (pending_commit) RETURN_IF_ERROR(target.Commit(*pending_commit));
  RETURN_IF_ERROR(KeepEmitted(target, prompt, out));
  out.decode_seconds = Seconds(decode_start, Mark(device, true));
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
    return absl::InternalError(absl::StrCat("autoregressive decoding failed: ", e.what()));
  }
}

absl::StatusOr<Generation> GenerateSpeculative(LanguageModel& target, Method& method,
                                               absl::Span<const int32_t> prompt, const DecodeOptions& options) {
  try {
    return SpeculativeImpl(target, method, prompt, options);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("method '", method.name, "' failed: ", e.what()));
  }
}

}  // namespace speclab
