// Chain speculative sampling on the device (the host rule is
// rejection_verifier.cc; same law, §1.2): draft i is accepted when
// u_i q_i(x_i) < p_i(x_i) with u_i ~ U[0, 1), i.e. with probability
// min(1, p/q); the first rejection at i emits y ~ norm((p_i - q_i)+), a fully
// accepted chain emits y ~ p_n. Every row's candidate y is drawn at once and
// the one at the stopping point is kept, so nothing waits for the host.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/verifiers/common/chain_on_device.h"
#include "algorithms/verifiers/common/residual_race.h"
#include "algorithms/verifiers/rejection/rejection_accepted.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_verifier.h"
#include "framework/model/fused_ops.h"
#include "framework/sampling.h"

namespace speclab {
namespace {

class RejectionOnDevice final : public DeviceVerifier {
 public:
  bool verifies_prefixes_alone() const override { return true; }  // a chain from the root down
  absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator& generator) const override {
    RETURN_IF_ERROR(verifiers::CheckDeviceChain(problem, "rejection", /*needs_draft=*/!problem.greedy));
    // p one-hot: min(1, p/q) is 1 on the argmax and 0 elsewhere, and (p - q)+ is the argmax.
    if (problem.greedy) return verifiers::GreedyChainAnswer(problem);
    const at::Tensor& p = problem.target_probs;
    // Draft i is accepted when u_i q_i(x_i) < p_{i-1}(x_i).
    const at::Tensor u = at::rand({p.size(0) - 1}, generator, p.options());
    const at::Tensor accepted = verifiers::RejectionAccepted(problem.tokens, p, problem.draft_probs, u);
    // The extra token: at the stopping row, the residual after rejecting the
    // next draft (the last row: p_n), raced with noise drawn for every row (as
    // sampling every row and keeping that one). A residual without mass
    // belongs to a draft that cannot be rejected (p <= q everywhere means
    // p == q): p itself will do there.
    const at::Tensor noise = at::empty_like(p).exponential_(1.0, generator);
    const at::Tensor extra = verifiers::ResidualRace(p, problem.draft_probs, noise, accepted.view({1}));
    return at::cat({accepted.view({1}), extra});
  }
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = "rejection",
     .description = "chain speculative sampling on the device (§1.2)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<RejectionOnDevice>();
     }});

}  // namespace
}  // namespace speclab
