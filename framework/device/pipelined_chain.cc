#include "framework/device/pipelined_chain.h"

#include <ATen/ATen.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_tree_builder.h"
#include "framework/device/device_length_stop.h"
#include "framework/device/device_verifier.h"
#include "framework/model/fused_ops.h"
#include "framework/sampling.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

// A chain's verdict cut after its first `kept` drafts (fused::CutChainAnswer):
// the token after them, where every kept draft was accepted, is the target
// row's argmax at temperature 0 (the rows are logits), else its exponential
// race.
at::Tensor CutChainAnswer(const at::Tensor& answer, const at::Tensor& kept, const at::Tensor& target_rows,
                          bool greedy, at::Generator& generator) {
  if (greedy) return fused::CutChainAnswer(answer, kept, target_rows, at::Tensor());
  at::Tensor noise = at::empty({1, target_rows.size(1)}, target_rows.options().dtype(at::kFloat));
  return fused::CutChainAnswer(answer, kept, target_rows, noise.exponential_(1.0, generator));
}

}  // namespace

absl::Status PipelinedChain::Check(const LanguageModel& target, const Method& method,
                                   absl::Span<const int32_t> prompt, int max_new_tokens) {
  if (prompt.size() < 2) return absl::FailedPreconditionError("the prompt has fewer than two tokens");
  const int64_t step = method.policy->MaxDraftLengthBound() + 1;
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
      gamma_(method.policy->MaxDraftLengthBound()) {}

absl::StatusOr<std::optional<at::Tensor>> PipelinedChain::Queue(int64_t min_root, int64_t max_root) {
  const c10::Device device = target().device();
  ASSIGN_OR_RETURN(std::optional<DraftTree> draft, DraftAt(min_root, max_root));
  if (!draft) return std::nullopt;  // DraftAt said why
  // This step's length: the policy's (it may move, observed one step late), at most gamma_.
  const int64_t gamma = draft->tokens.size(0) - 1;
  if (gamma < 1 || gamma > gamma_)
    return absl::InternalError(absl::StrCat("pipelined chain: drafted ", gamma, " tokens, not 1 to ", gamma_));
  const at::Tensor tokens = draft->tokens.to(device);
  // The drafter's riders (lookahead's window) follow the chain in the
  // forward, whose room Check() did not count: a first step without it steps
  // on the host instead.
  ASSIGN_OR_RETURN(const DeviceRiders riders, RidersOfStep());
  const int64_t r = riders.size();
  std::string unfit;
  if (r > 0 && gamma + 1 + r > kMaxStepTokens) {
    unfit = absl::StrCat("a chain of ", gamma, " drafts and ", r, " riders is past ", kMaxStepTokens, " tokens");
  } else if (r > 0 && max_root + gamma + 1 + r > target().capacity()) {
    unfit = absl::StrCat("a queued chain and its riders need ", max_root + gamma + 1 + r,
                         " KV slots, past the capacity ", target().capacity(), " (models.kv_capacity)");
  }
  if (!unfit.empty()) {
    if (queued_ > 0)
      return absl::FailedPreconditionError(absl::StrCat("pipelined chain, step ", queued_ + 1, ": ", unfit));
    Refuse(unfit);
    return std::nullopt;
  }
  ++queued_;
  const DevicePosition at = RootAt(min_root, max_root);
  at::Tensor logits;
  if (r == 0) {
    ASSIGN_OR_RETURN(logits, target_device().ForwardAt(tokens, at));
  } else {
    // The chain as a tree of one path, so that the riders can follow it.
    const ChainAsTree& path = AsTree(gamma, tokens.options());
    ASSIGN_OR_RETURN(logits, ForwardTreeWithRiders(tokens, path.depths, path.mask, at, riders));
  }

  DeviceChainProblem problem{.tokens = tokens, .target_probs = TargetRows(logits, sampling()),
                             .draft_probs = draft->draft_probs.defined() ? draft->draft_probs.to(device) : at::Tensor(),
                             .greedy = sampling().greedy()};
  ASSIGN_OR_RETURN(at::Tensor answer, method().device_verifier->Verify(problem, verify_generator()));
  at::Tensor kept;  // undefined: all gamma drafts
  if (method().device_stop != nullptr) {
    if (draft->kept_length.defined()) {
      kept = draft->kept_length.to(device);  // the drafter stopped there
    } else if (draft->draft_facts.defined()) {
      kept = method().device_stop->KeptLength(FactsOfColumns(draft->draft_facts.to(device), method().policy->draft_row()));
    } else {
      return absl::InternalError("pipelined chain: the builder kept no facts for the length policy's stop");
    }
    answer = CutChainAnswer(answer, kept, problem.target_probs, sampling().greedy(), verify_generator());
  }
  // With riders the forward was a tree's: its chain, in place already,
  // becomes context, and the riders' slots lie past it.
  if (r > 0) RETURN_IF_ERROR(target_device().CompactPathAt(AsTree(gamma, tokens.options()).drafts, at));
  // The root and the accepted drafts' target features, for drafters that read them.
  if (reads_target_features()) RETURN_IF_ERROR(KeepPathFeatures(answer.narrow(0, 0, 1) + 1));
  // The next step's root is the extra token, after the last accepted token;
  // the drafts, then the root, go into the context after the last root.
  fused::ChainRootAdvance next =
      fused::AdvanceChainRoot(answer, tokens.contiguous(), kept, positions(), context());
  AdvanceTo(std::move(next.last_two), std::move(next.positions));
  return next.record;
}

const PipelinedChain::ChainAsTree& PipelinedChain::AsTree(int64_t gamma, const at::TensorOptions& longs) {
  if (!as_tree_ || as_tree_->depths.size(0) != gamma + 1) {
    as_tree_ = ChainAsTree{.depths = at::arange(gamma + 1, longs),
                           .mask = at::ones({gamma + 1, gamma + 1}, longs.dtype(at::kBool)).tril(),
                           .drafts = at::arange(1, gamma + 1, longs)};
  }
  return *as_tree_;
}

absl::StatusOr<PipelinedRead> PipelinedChain::Read(const at::Tensor& host_record) const {
  const int64_t gamma = host_record.data_ptr<int64_t>()[0];
  if (gamma < 1 || gamma > gamma_ || host_record.numel() != gamma + 5)
    return absl::InternalError(absl::StrCat("pipelined chain: a record of ", host_record.numel(), " for ", gamma,
                                            " drafts"));
  const int64_t* data = host_record.data_ptr<int64_t>() + 1;
  const int64_t accepted = data[gamma + 1], kept = data[gamma + 3];
  if (kept < 1 || kept > gamma)
    return absl::InternalError(absl::StrCat("the length policy's device stop kept ", kept, " of ", gamma, " drafts"));
  if (accepted < 0 || accepted > kept)
    return absl::InternalError(absl::StrCat("device verifier accepted ", accepted, " of ", kept, " drafts"));
  // The drafts past the stop were drafted (in the drafter's graph) but are not part of the step.
  PipelinedRead read{.emitted = std::vector<int32_t>(data + 1, data + 1 + accepted),
                     .tree_nodes = static_cast<int>(kept),
                     .longest_path = static_cast<int>(kept)};
  read.emitted.push_back(static_cast<int32_t>(data[gamma + 2]));
  return read;
}

}  // namespace speclab
