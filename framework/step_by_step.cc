#include "framework/step_by_step.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/core/options.h"
#include "framework/core/verifier_registry.h"
#include "framework/device/device_verifier.h"
#include "framework/device_transfer.h"
#include "framework/sampling.h"

namespace speclab {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
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
// `draft_top_k`: the warp the drafts were drawn with (0: none).
absl::StatusOr<Verdict> VerifyTreeOnDevice(const DeviceVerifier& verifier, DraftTree& draft, const at::Tensor& probs,
                                           bool greedy, int64_t draft_top_k, at::Generator& generator) {
  const c10::Device device = probs.device();
  const int64_t n = DraftSize(draft);
  std::vector<int64_t> host_parents;
  at::Tensor parents;
  int64_t branching = -1;
  if (draft.device_shape) {
    parents = draft.device_shape->parents.to(device);
    branching = draft.device_shape->branching_bound;
  } else {
    branching = 0;
    for (int i = 0; i < draft.tree.size(); ++i) {
      host_parents.push_back(draft.tree.parent(i));
      branching = std::max<int64_t>(branching, static_cast<int64_t>(draft.tree.children(i).size()));
    }
    parents = LongsToDevice(host_parents, device);
  }
  DeviceTreeProblem problem{.tokens = draft.tokens.to(device), .parents = parents, .target_probs = probs,
                            .draft_probs = draft.draft_probs, .sampling = draft.sampling, .greedy = greedy,
                            .branching_bound = branching, .draft_support_bound = draft_top_k > 0 ? draft_top_k : -1};
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

// The inputs of a step's one target forward: the tree's nodes, then the
// drafter's riders, each rider seeing the root and the riders its row of
// `sees` marks. Built on the host where the tree's shape is known there (one
// upload each, as without riders); a shape chosen on the device goes to the
// forward without a read.
struct ForwardInputs {
  at::Tensor tokens, positions, mask;
};

absl::StatusOr<ForwardInputs> ScoreInputs(const DraftTree& draft, const RiderTokens& riders, int64_t root_position,
                                          c10::Device device) {
  const int64_t n = DraftSize(draft), r = riders.size();
  ForwardInputs in;
  in.tokens = draft.tokens.to(device);
  if (const std::optional<DraftTree::DeviceShape>& shape = draft.device_shape) {
    // Only drafters with device forms draft such trees, and riders have none.
    if (r > 0) return absl::InternalError("riders beside a tree whose shape only the device knows");
    in.positions = shape->depths.to(device) + root_position;
    in.mask = shape->mask.to(device);
    return in;
  }
  if (r > 0) {
    const std::vector<int64_t> rider_tokens(riders.tokens.begin(), riders.tokens.end());
    in.tokens = at::cat({in.tokens, LongsToDevice(rider_tokens, device)});
  }
  std::vector<int64_t> positions = draft.tree.Positions(root_position);
  for (int64_t offset : riders.offsets) positions.push_back(root_position + offset);
  in.positions = LongsToDevice(positions, device);
  if (r == 0) {
    if (!IsChain(draft.tree)) in.mask = MaskToDevice(draft.tree.AncestorMask(), n, n, device);
    return in;
  }
  const std::vector<uint8_t> tree_mask = draft.tree.AncestorMask();
  const int64_t width = n + r;
  std::vector<uint8_t> mask(width * width, 0);
  for (int64_t i = 0; i < n; ++i) std::copy_n(tree_mask.begin() + i * n, n, mask.begin() + i * width);
  for (int64_t i = 0; i < r; ++i) {
    mask[(n + i) * width] = 1;  // the root
    std::copy_n(riders.sees.begin() + i * r, r, mask.begin() + (n + i) * width + n);
  }
  in.mask = MaskToDevice(mask, width, width, device);
  return in;
}

}  // namespace

Clock::time_point MarkPhase(c10::Device device, bool synchronize) {
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

StepByStep::StepByStep(LanguageModel& target, Method& method, const DecodeOptions& options, Randomness& random)
    : target_(target),
      method_(method),
      options_(options),
      random_(random),
      features_(method.drafter->target_features()),
      defer_commit_([&] {
        const std::vector<LanguageModel*> models = method.drafter->models();
        return std::find(models.begin(), models.end(), &target) == models.end();
      }()),
      greedy_for_top_k_(options.sampling.greedy() && method.lossless() &&
                        method.verifier->traits().needs_draft_distributions) {}

std::string GreedyStandInNote(const Method& method) {
  return absl::StrCat("at temperature 0 the tree builder '", method.tree_builder_name,
                      "' drafts its top-k picks, which no q is the law of: they are verified by greedy "
                      "exact match, which the lossless rule '", method.verifier_name,
                      "' reduces to when p is one-hot");
}

void StepByStep::NoteGreedyStandIn() { rule_note_ = GreedyStandInNote(method_); }

absl::StatusOr<StepByStep::Step> StepByStep::Draft(absl::Span<const int32_t> context) {
  Step step;
  step.started = Clock::now();
  RETURN_IF_ERROR(method_.drafter->BeginStep(context));
  BuildRequest request{.root_token = context.back(), .sampling = method_.drafter_sampling.For(options_.sampling),
                       .policy = method_.policy.get(), .generator = &random_.draft, .device = target_.device()};
  ASSIGN_OR_RETURN(step.draft, method_.tree_builder->Build(*method_.drafter, request));
  ASSIGN_OR_RETURN(step.riders, method_.drafter->Riders());
  RETURN_IF_ERROR(step.riders.Check(method_.drafter_name, target_.config().vocab_size));
  RETURN_IF_ERROR(CheckCapacity(target_, context,
                                options_.max_new_tokens + static_cast<int>(DraftSize(step.draft)) + step.riders.size()));
  step.drafted = MarkPhase(target_.device(), options_.time_phases);
  return step;
}

absl::Status StepByStep::Score(Step& step) {
  if (pending_commit_) {
    RETURN_IF_ERROR(target_.Commit(*pending_commit_));
    pending_commit_.reset();
  }
  // One target forward over the whole tree and the drafter's riders, on top of the committed cache.
  const DraftTree& draft = step.draft;
  const int64_t n = DraftSize(draft);
  const RiderTokens& riders = step.riders;
  ASSIGN_OR_RETURN(const ForwardInputs in, ScoreInputs(draft, riders, target_.committed_length(), target_.device()));
  ASSIGN_OR_RETURN(at::Tensor logits, target_.Forward(in.tokens, in.positions, in.mask));
  if (riders.size() > 0) {
    RETURN_IF_ERROR(method_.drafter->RidersScored(logits.slice(0, n)));
    logits = logits.slice(0, 0, n);
  }
  step.target_rows = TargetRows(logits, options_.sampling);
  return absl::OkStatus();
}

absl::Status StepByStep::Verify(Step& step) {
  const DeviceVerifier* device_verifier = options_.verify_on_device ? method_.device_verifier.get() : nullptr;
  const bool greedy = options_.sampling.greedy();
  DraftTree& draft = step.draft;
  TokenTree& tree = draft.tree;
  const std::optional<DraftTree::DeviceShape>& shape = draft.device_shape;
  if (device_verifier != nullptr && !shape && IsChain(tree) && !method_.tree_builder->traits().may_branch) {
    ASSIGN_OR_RETURN(step.verdict, VerifyChainOnDevice(*device_verifier, tree, draft.tokens, step.target_rows,
                                                       draft.draft_probs, greedy, random_.verify));
  } else if (device_verifier != nullptr && device_verifier->verifies_trees()) {
    // At temperature 0 a device form is greedy matching, the stand-in's rule.
    if (greedy_for_top_k_ && draft.sampling == DraftSampling::kDeterministic) NoteGreedyStandIn();
    ASSIGN_OR_RETURN(step.verdict,
                     VerifyTreeOnDevice(*device_verifier, draft, step.target_rows, greedy,
                                        method_.drafter_sampling.For(options_.sampling).top_k, random_.verify));
  } else {
    HostView host = FetchForVerification(draft.tokens, step.target_rows, draft.draft_probs,
                                         draft.sampling != DraftSampling::kDeterministic,
                                         method_.verifier->traits().needs_target_rows, greedy,
                                         shape ? shape->parents : at::Tensor());
    if (shape) RETURN_IF_ERROR(AdoptShape(draft, host.parents, host.tokens));
    for (int i = 1; i < tree.size(); ++i) tree.set_token(i, host.tokens[i]);
    VerificationProblem problem{.tree = &tree, .target = std::move(host.target),
                                .target_argmax = std::move(host.argmax), .draft = std::move(host.draft),
                                .sampling = draft.sampling};
    const Verifier* rule = method_.verifier.get();
    if (greedy_for_top_k_ && draft.sampling == DraftSampling::kDeterministic) {
      if (greedy_rule_ == nullptr) {  // made on first use: most generations never need it
        ASSIGN_OR_RETURN(Options spec, Options::FromString("{type: greedy}", "built-in"));
        ASSIGN_OR_RETURN(greedy_rule_, VerifierRegistry::Create(spec, "verifier"));
      }
      rule = greedy_rule_.get();
      NoteGreedyStandIn();
    }
    ASSIGN_OR_RETURN(step.verdict, rule->Verify(problem, random_.verify_host));
  }
  RETURN_IF_ERROR(CheckPath(tree, step.verdict));
  step.verified = Clock::now();
  return absl::OkStatus();
}

absl::Status StepByStep::Commit(Step& step) {
  const TokenTree& tree = step.draft.tree;
  std::vector<int64_t> keep{0};
  std::vector<int> path{0};
  for (int node : step.verdict.accepted) {
    keep.push_back(node);
    path.push_back(node);
    step.emitted.push_back(tree.token(node));
  }
  step.emitted.push_back(step.verdict.extra_token);
  TargetFeatures features;  // read before anything runs the target again
  if (!features_.empty()) {
    ASSIGN_OR_RETURN(features, GatherFeatures(target_, features_,
                                              LongsToDevice(std::vector<int64_t>(keep.begin(), keep.end()),
                                                            target_.device())));
  }
  if (defer_commit_) {
    pending_commit_ = std::move(keep);
  } else {
    RETURN_IF_ERROR(target_.Commit(keep));
  }
  return method_.drafter->EndStep(tree, path, features);
}

StepStats StepByStep::Adapt(const Step& step) {
  const auto done = MarkPhase(target_.device(), options_.time_phases);
  StepStats stats{.tree_nodes = step.draft.tree.size() - 1, .longest_path = step.draft.tree.max_depth(),
                  .accepted = static_cast<int>(step.verdict.accepted.size()),
                  .draft_seconds = Seconds(step.started, step.drafted),
                  .verify_seconds = Seconds(step.drafted, step.verified),
                  .other_seconds = Seconds(step.verified, done)};
  method_.policy->Observe({.drafted = stats.longest_path, .accepted = stats.accepted,
                           .tree_nodes = stats.tree_nodes, .step_seconds = Seconds(step.started, done)});
  return stats;
}

absl::Status StepByStep::Finish() {
  if (!pending_commit_) return absl::OkStatus();
  absl::Status committed = target_.Commit(*pending_commit_);
  pending_commit_.reset();
  return committed;
}

}  // namespace speclab
