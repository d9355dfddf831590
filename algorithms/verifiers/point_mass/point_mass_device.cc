// The point-mass rule on chains and trees, on the device (host rule:
// point_mass_verifier.cc, §1.4), in its sample-then-match form: draw
// y_i ~ p_i at every node, descend into the child equal to the y of its
// parent (on a chain: accept drafts while they equal the y before them), and
// emit the y where matching stops. A rejected child's token gets zero mass in
// the host rule's residual; here the walk simply never meets y there, so y is
// the residual's draw.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/verifiers/common/chain_on_device.h"
#include "algorithms/verifiers/common/tree_on_device.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_verifier.h"
#include "framework/sampling.h"

namespace speclab {
namespace {

class PointMassOnDevice final : public DeviceVerifier {
 public:
  bool verifies_prefixes_alone() const override { return true; }  // a chain from the root down
  absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator& generator) const override {
    RETURN_IF_ERROR(verifiers::CheckDeviceChain(problem, "point_mass", /*needs_draft=*/false));
    if (problem.greedy) return verifiers::GreedyChainAnswer(problem);  // y ~ one-hot p is its argmax
    const at::Tensor y = SampleRows(problem.target_probs, generator);
    const int64_t drafts = y.size(0) - 1;
    const at::Tensor accepted = verifiers::LeadingAccepted(problem.tokens.narrow(0, 1, drafts) == y.narrow(0, 0, drafts));
    return verifiers::ChainAnswer(accepted, y);
  }

  bool verifies_trees() const override { return true; }
  absl::StatusOr<at::Tensor> VerifyTree(const DeviceTreeProblem& problem, at::Generator& generator) const override {
    RETURN_IF_ERROR(verifiers::CheckDeviceTree(problem, "point_mass"));
    const at::Tensor& p = problem.target_probs;
    return verifiers::MatchWalk(problem, problem.greedy ? GreedyTokens(p) : SampleRows(p, generator));
  }
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = "point_mass",
     .description = "point-mass rule on chains and trees, on the device (§1.4)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<PointMassOnDevice>();
     }});

}  // namespace
}  // namespace speclab
