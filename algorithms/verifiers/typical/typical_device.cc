// Medusa typical acceptance on the device (host rule: typical_verifier.cc,
// §1.11; LOSSY, deterministic). Every node's test at once: p(x) at its
// parent against min(ε, δ·exp(-H(parent))); a node is reachable when it and
// all its ancestors pass (the tree's ancestor mask); the deepest reachable
// node wins, the likeliest by Σ log p among the deepest, the first on exact
// ties; the extra token is argmax p there. In float64, as the host rule.
#include <ATen/ATen.h>

#include <cmath>
#include <exception>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "framework/error_text.h"
#include "algorithms/verifiers/common/tree_on_device.h"
#include "algorithms/verifiers/typical/typical_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_verifier.h"
#include "framework/model/fused_ops.h"
#include "framework/sampling.h"

namespace speclab {
namespace {

constexpr char kName[] = "typical";
using typical::kEntropyEpsilon;

class TypicalOnDevice final : public DeviceVerifier {
 public:
  TypicalOnDevice(double threshold, double alpha) : threshold_(threshold), alpha_(alpha) {}
  bool verifies_prefixes_alone() const override { return true; }  // a chain from the root down

  // A chain is a tree.
  absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator& generator) const override {
    ASSIGN_OR_RETURN(at::Tensor walk,
                     VerifyTree(verifiers::ChainAsTree(problem, DraftSampling::kDeterministic), generator));
    return verifiers::ChainAnswerOfWalk(walk);
  }

  bool verifies_trees() const override { return true; }
  absl::StatusOr<at::Tensor> VerifyTree(const DeviceTreeProblem& problem, at::Generator&) const override {
    RETURN_IF_ERROR(verifiers::CheckDeviceTree(problem, kName));
    try {
      return Walk(problem);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(kName, " (device): ", ErrorText(e)));
    }
  }

 private:
  at::Tensor Walk(const DeviceTreeProblem& problem) const {
    const at::Tensor& p = problem.target_probs;
    const int64_t n = p.size(0);
    const auto longs = at::TensorOptions().dtype(at::kLong).device(p.device());
    const at::Tensor parents = problem.parents.to(p.device()), tokens = problem.tokens.to(p.device());
    const at::Tensor parent_rows = parents.clamp_min(0);  // the root's entry is never read
    const at::Tensor argmax = GreedyTokens(p);
    at::Tensor pass, log_p;
    if (problem.greedy) {
      // One-hot rows (p may be logits then): p(x) is 1 on the argmax, 0
      // elsewhere, and the threshold is min(ε, δ·exp(log(1 + 1e-5))).
      const bool one_passes = 1.0 > std::min(threshold_, alpha_ * std::exp(std::log1p(kEntropyEpsilon)));
      pass = tokens.eq(argmax.index_select(0, parent_rows));
      if (!one_passes) pass.fill_(false);
      log_p = at::zeros({n}, longs.dtype(at::kDouble));
    } else {
      const at::Tensor rows = p.to(at::kDouble);
      const at::Tensor entropy = -(rows * (rows + kEntropyEpsilon).log()).sum(1);
      const at::Tensor threshold = (alpha_ * (-entropy).exp()).clamp_max(threshold_);
      const at::Tensor prob = rows.index_select(0, parent_rows).gather(1, tokens.unsqueeze(1)).squeeze(1);
      pass = prob.gt(threshold.index_select(0, parent_rows));
      log_p = at::where(pass, prob.log(), at::zeros_like(prob));
    }
    pass = pass.index_fill(0, at::zeros({1}, longs), true);  // the root
    auto [mask, depths] = fused::TreeMask(parents);
    // Reachable: no failing node among the ancestors and the node itself.
    const at::Tensor reachable = mask.logical_and(pass.logical_not().unsqueeze(0)).any(1).logical_not();
    const at::Tensor likelihood = (mask.to(at::kDouble) * log_p.unsqueeze(0)).sum(1);
    const at::Tensor reach_depth = at::where(reachable, depths, at::full_like(depths, -1));
    const at::Tensor deepest = reachable.logical_and(depths.eq(reach_depth.max()));
    const double never = -std::numeric_limits<double>::infinity();
    const at::Tensor best = at::where(deepest, likelihood, at::full_like(likelihood, never)).argmax().view({1});
    return verifiers::PathAnswer(mask, best, argmax.index_select(0, best));
  }

  double threshold_;
  double alpha_;
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = kName,
     .description = "Medusa typical acceptance on the device (§1.11); lossy",
     .lossless = "lossy",
     .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       ASSIGN_OR_RETURN(typical::TypicalOptions o, typical::ReadTypicalOptions(options));
       return std::make_unique<TypicalOnDevice>(o.threshold, o.alpha);
     }});

}  // namespace
}  // namespace speclab
