#include "algorithms/verifiers/common/tree_on_device.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "framework/model/fused_ops.h"

namespace speclab::verifiers {

absl::Status CheckDeviceTree(const DeviceTreeProblem& problem, const std::string& rule) {
  auto is_nodes = [](const at::Tensor& t) {
    return t.defined() && t.dim() == 1 && t.size(0) >= 1 && t.scalar_type() == at::kLong;
  };
  if (!is_nodes(problem.tokens) || !is_nodes(problem.parents) || problem.parents.size(0) != problem.tokens.size(0))
    return absl::InvalidArgumentError(absl::StrCat(rule, " (device): tokens and parents must be int64 [n >= 1]"));
  const at::Tensor& p = problem.target_probs;
  if (!p.defined() || p.dim() != 2 || p.size(0) != problem.tokens.size(0))
    return absl::InvalidArgumentError(
        absl::StrCat(rule, " (device): target rows must be [", problem.tokens.size(0), ", vocab]"));
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> MatchWalk(const DeviceTreeProblem& problem, const at::Tensor& y) {
  try {
    return fused::TreeWalk(problem.parents.to(y.device()), problem.tokens.to(y.device()), y);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("tree walk on the device: ", e.what()));
  }
}

}  // namespace speclab::verifiers
