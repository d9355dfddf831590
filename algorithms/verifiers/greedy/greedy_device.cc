// Greedy exact match on the device (host rule: greedy_verifier.cc, §1.1). On
// a chain: accept drafts while they equal the target's argmax before them,
// then emit the argmax. On a tree, the host rule's choice: each leaf's
// deepest ancestor (or itself) whose whole path matches the argmax, the
// deepest of those with the first leaf on ties, every node at once through
// the tree's ancestor mask.
#include <ATen/ATen.h>

#include <exception>
#include <memory>

#include "absl/strings/str_cat.h"
#include "framework/error_text.h"
#include "algorithms/verifiers/common/chain_on_device.h"
#include "algorithms/verifiers/common/tree_on_device.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_verifier.h"
#include "framework/model/fused_ops.h"
#include "framework/sampling.h"

namespace speclab {
namespace {

class GreedyOnDevice final : public DeviceVerifier {
 public:
  bool verifies_prefixes_alone() const override { return true; }  // a chain from the root down
  absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator&) const override {
    RETURN_IF_ERROR(verifiers::CheckDeviceChain(problem, "greedy", /*needs_draft=*/false));
    return verifiers::GreedyChainAnswer(problem);
  }

  bool verifies_trees() const override { return true; }
  absl::StatusOr<at::Tensor> VerifyTree(const DeviceTreeProblem& problem, at::Generator&) const override {
    RETURN_IF_ERROR(verifiers::CheckDeviceTree(problem, "greedy"));
    try {
      return Walk(problem);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("greedy (device): ", ErrorText(e)));
    }
  }

 private:
  static at::Tensor Walk(const DeviceTreeProblem& problem) {
    const at::Tensor& p = problem.target_probs;
    const int64_t n = p.size(0);
    const at::Tensor parents = problem.parents.to(p.device()), tokens = problem.tokens.to(p.device());
    const at::Tensor argmax = GreedyTokens(p);
    at::Tensor matches = tokens.eq(argmax.index_select(0, parents.clamp_min(0)));
    matches = matches.index_fill(0, at::zeros({1}, parents.options()), true);  // the root
    auto [mask, depths] = fused::TreeMask(parents);
    // A node's path matches when no node on it fails; each node's deepest
    // such ancestor-or-self (ancestors have distinct depths).
    const at::Tensor path_matches = mask.logical_and(matches.logical_not().unsqueeze(0)).any(1).logical_not();
    const at::Tensor depth_if_matched = at::where(path_matches, depths, at::full_like(depths, -1));
    const at::Tensor end = at::where(mask, depth_if_matched.unsqueeze(0), at::full_like(mask, -1, at::kLong)).argmax(1);
    // Leaves in index order: the first with the deepest end.
    const at::Tensor is_leaf = at::ones({n}, mask.options()).index_fill(0, parents.narrow(0, 1, n - 1), false);
    const at::Tensor end_depth = at::where(is_leaf, depths.index_select(0, end), at::full_like(depths, -1));
    const at::Tensor best = end.index_select(0, end_depth.argmax().view({1}));
    return verifiers::PathAnswer(mask, best, argmax.index_select(0, best));
  }
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = "greedy",
     .description = "greedy exact match on chains and trees, on the device (§1.1)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<GreedyOnDevice>();
     }});

}  // namespace
}  // namespace speclab
