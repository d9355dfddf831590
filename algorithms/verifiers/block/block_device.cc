// Block verification on the device (host rule: block_verifier.cc, §1.9), all
// positions at once:
//   - the weights w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i)) as a clamped
//     running product: with L_i = Σ_{k<=i} log(p_k(x_k) / q_k(x_k)) (L_0 = 0),
//     w_i = exp(L_i - max_{j<=i} L_j) (induction: min(0, s + l) with
//     s = L_{i-1} - M_{i-1} is L_i - max(L_i, M_{i-1}));
//   - every h_i, and one Bernoulli draw per position; the backward scan's
//     first success is the largest i that succeeds (h_0 = 1 always does);
//   - one draw from the stopping law at τ (norm(r_τ), or p_{γ+1} at τ = γ),
//     raced with noise drawn after the Bernoulli draws, so independent of τ.
// The draws are independent of one another, so drawing them all up front
// gives the host scan's law. verifiers::BlockAccepted and verifiers::ResidualRace
// run it in about five launches.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/verifiers/block/block_accepted.h"
#include "algorithms/verifiers/common/chain_on_device.h"
#include "algorithms/verifiers/common/residual_race.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_verifier.h"
#include "framework/model/fused_ops.h"
#include "framework/sampling.h"

namespace speclab {
namespace {

class BlockOnDevice final : public DeviceVerifier {
 public:
  absl::StatusOr<at::Tensor> Verify(const DeviceChainProblem& problem, at::Generator& generator) const override {
    RETURN_IF_ERROR(verifiers::CheckDeviceChain(problem, "block", /*needs_draft=*/!problem.greedy));
    // One-hot p: w_i is 1 while the drafts match the argmax and 0 after, so
    // the longest matching prefix and then the argmax, as token-wise rejection.
    if (problem.greedy) return verifiers::GreedyChainAnswer(problem);
    const at::Tensor& p = problem.target_probs;
    const int64_t gamma = p.size(0) - 1;
    if (gamma == 0) return verifiers::ChainAnswer(at::zeros({}, p.options().dtype(at::kLong)), SampleRows(p, generator));
    const at::Tensor u = at::rand({gamma}, generator, p.options());  // positions 1..γ
    auto [tau, weights] = verifiers::BlockAccepted(problem.tokens, p, problem.draft_probs, u);
    // Stopping laws: norm(r_τ) (p_{τ+1} itself where r_τ has no mass, a
    // probability-zero branch), and p_{γ+1} at τ = γ.
    const at::Tensor noise = at::empty_like(p).exponential_(1.0, generator);
    return at::cat({tau.view({1}), verifiers::ResidualRace(p, problem.draft_probs, noise, tau.view({1}), weights)});
  }
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = "block",
     .description = "block verification on the device (§1.9)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<BlockOnDevice>();
     }});

}  // namespace
}  // namespace speclab
