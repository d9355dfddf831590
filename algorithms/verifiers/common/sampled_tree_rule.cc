#include "algorithms/verifiers/common/sampled_tree_rule.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "algorithms/verifiers/common/chain_on_device.h"
#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_on_device.h"
#include "framework/core/status_macros.h"
#include "framework/error_text.h"
#include "framework/sampling.h"

namespace speclab::verifiers {

SampledTreeRule::SampledTreeRule(std::string rule, std::vector<DraftSampling> exact_for, int uniforms_per_node)
    : rule_(std::move(rule)), exact_for_(std::move(exact_for)), uniforms_per_node_(uniforms_per_node) {}

absl::StatusOr<at::Tensor> SampledTreeRule::Verify(const DeviceChainProblem& problem,
                                                   at::Generator& generator) const {
  RETURN_IF_ERROR(CheckDeviceChain(problem, rule_, /*needs_draft=*/!problem.greedy));
  if (problem.greedy) return GreedyChainAnswer(problem);
  ASSIGN_OR_RETURN(at::Tensor walk, VerifyTree(ChainAsTree(problem, exact_for_.front()), generator));
  return ChainAnswerOfWalk(walk);
}

absl::StatusOr<at::Tensor> SampledTreeRule::VerifyTree(const DeviceTreeProblem& problem,
                                                       at::Generator& generator) const {
  RETURN_IF_ERROR(CheckDeviceTree(problem, rule_, /*needs_draft=*/!problem.greedy));
  const at::Tensor& p = problem.target_probs;
  if (problem.greedy) return MatchWalk(problem, GreedyTokens(p));
  if (std::find(exact_for_.begin(), exact_for_.end(), problem.sampling) == exact_for_.end()) {
    std::vector<std::string> names;
    for (DraftSampling s : exact_for_) names.push_back(DraftSamplingName(s));
    return absl::InvalidArgumentError(absl::StrCat(rule_, " (device): exact only for drafts sampled as ",
                                                   absl::StrJoin(names, " or "), ", got ",
                                                   DraftSamplingName(problem.sampling)));
  }
  RETURN_IF_ERROR(CheckDrafts(problem));
  try {
    const at::Tensor uniforms = at::rand({uniforms_per_node_ * p.size(0)}, generator, p.options());
    const at::Tensor noise = at::empty({p.size(1)}, p.options()).exponential_(1.0, generator);
    return Walk(problem, problem.parents.to(p.device()), problem.tokens.to(p.device()),
                problem.draft_probs.to(p.device()), uniforms, noise);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(rule_, " (device): ", ErrorText(e)));
  }
}

absl::Status SampledTreeRule::CheckDrafts(const DeviceTreeProblem&) const { return absl::OkStatus(); }

}  // namespace speclab::verifiers
