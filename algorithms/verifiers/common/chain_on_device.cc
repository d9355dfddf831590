#include "algorithms/verifiers/common/chain_on_device.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/device/kernel_launch.h"
#include "framework/sampling.h"

namespace speclab::verifiers {
namespace {

std::string Shape(const at::Tensor& t) { return absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "]"); }

}  // namespace

absl::Status CheckDeviceChain(const DeviceChainProblem& problem, const std::string& rule, bool needs_draft) {
  const at::Tensor& tokens = problem.tokens;
  const at::Tensor& p = problem.target_probs;
  if (!tokens.defined() || tokens.dim() != 1 || tokens.size(0) < 1 || tokens.scalar_type() != at::kLong)
    return absl::InvalidArgumentError(absl::StrCat(rule, " (device): tokens must be int64 [n >= 1]"));
  if (!p.defined() || p.dim() != 2 || p.size(0) != tokens.size(0))
    return absl::InvalidArgumentError(absl::StrCat(rule, " (device): target rows must be [", tokens.size(0),
                                                   ", vocab], got ", p.defined() ? Shape(p) : "none"));
  if (!needs_draft) return absl::OkStatus();
  if (!problem.draft_probs.defined())
    return absl::InvalidArgumentError(absl::StrCat(rule, " (device): needs the draft rows q the drafts were sampled from"));
  if (problem.draft_probs.sizes() != p.sizes())
    return absl::InvalidArgumentError(absl::StrCat(rule, " (device): draft rows ", Shape(problem.draft_probs),
                                                   " do not match target rows ", Shape(p)));
  return absl::OkStatus();
}

at::Tensor LeadingAccepted(const at::Tensor& accepted) {
  if (accepted.numel() == 0) return at::zeros({}, accepted.options().dtype(at::kLong));
  return accepted.to(at::kLong).cumprod(0).sum();
}

at::Tensor ChainAnswer(const at::Tensor& accepted, const at::Tensor& extra_per_stop) {
  return at::cat({accepted.view({1}), extra_per_stop.index_select(0, accepted.view({1}))});
}

at::Tensor GreedyChainAnswer(const DeviceChainProblem& problem) {
  const at::Tensor best = GreedyTokens(problem.target_probs);
  const int64_t drafts = best.size(0) - 1;
  return ChainAnswer(LeadingAccepted(problem.tokens.narrow(0, 1, drafts) == best.narrow(0, 0, drafts)), best);
}

void CheckChainCountInputs(const char* op, const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q,
                           const at::Tensor& u, int64_t min_rows) {
  TORCH_CHECK(p.dim() == 2 && p.size(0) >= min_rows && q.sizes() == p.sizes(), op, ": p ", p.sizes(), " and q ",
              q.sizes(), " must be one [rows >= ", min_rows, ", cols] shape");
  TORCH_CHECK(tokens.dim() == 1 && tokens.size(0) == p.size(0) && tokens.scalar_type() == at::kLong, op,
              ": tokens ", tokens.sizes(), " must be int64 [", p.size(0), "]");
  TORCH_CHECK(u.dim() == 1 && u.size(0) == p.size(0) - 1, op, ": u ", u.sizes(), " must be [", p.size(0) - 1, "]");
}

bool ChainCountKernelsTake(const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q, const at::Tensor& u) {
  return kernel_launch::FloatRows(p) && kernel_launch::FloatRows(q) && kernel_launch::FloatVector(u) &&
         q.device() == p.device() && u.device() == p.device() && tokens.device() == p.device();
}

}  // namespace speclab::verifiers
