// Block verification on the device (host rule: block_verifier.cc, §1.9), all
// positions at once:
//   - the weights w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i)) as a clamped
//     running product: with L_i = Σ_{k<=i} log(p_k(x_k) / q_k(x_k)) (L_0 = 0),
//     w_i = exp(L_i - max_{j<=i} L_j) (induction: min(0, s + l) with
//     s = L_{i-1} - M_{i-1} is L_i - max(L_i, M_{i-1}));
//   - every h_i, and one Bernoulli draw per position; the backward scan's
//     first success is the largest i that succeeds (h_0 = 1 always does);
//   - one draw from every stopping law (norm(r_i), or p_{γ+1} at i = γ), of
//     which the one at τ is emitted.
// The draws are independent of one another, so drawing them all up front
// gives the host scan's law.
#include <ATen/ATen.h>

#include <memory>

#include "algorithms/verifiers/common/chain_on_device.h"
#include "framework/core/status_macros.h"
#include "framework/device_verifier.h"
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
    const at::Tensor& q = problem.draft_probs;
    const int64_t gamma = p.size(0) - 1;
    const auto options = p.options();
    if (gamma == 0) return verifiers::ChainAnswer(at::zeros({}, options.dtype(at::kLong)), SampleRows(p, generator));
    const at::Tensor x = problem.tokens.narrow(0, 1, gamma).unsqueeze(1);
    const at::Tensor px = p.narrow(0, 0, gamma).gather(1, x).squeeze(1);  // p_i(x_i), i = 1..γ
    const at::Tensor qx = q.narrow(0, 1, gamma).gather(1, x).squeeze(1);  // q_i(x_i)
    // q_i(x_i) = 0 (a draft q could not have drawn) gives weight 0, as the host rule.
    const at::Tensor ratio = at::where(qx > 0, px / qx, at::zeros_like(px));
    const at::Tensor log_weight = at::cat({at::zeros({1}, options), ratio.log().cumsum(0)});  // L_0..L_γ
    const at::Tensor w = (log_weight - std::get<0>(log_weight.cummax(0))).exp();          // w_0..w_γ
    const at::Tensor w_before = w.narrow(0, 0, gamma).unsqueeze(1);                        // w_0..w_{γ-1}
    // r_i = (w_i p_{i+1} - q_{i+1})+ for i = 0..γ-1.
    const at::Tensor r = (w_before * p.narrow(0, 0, gamma) - q.narrow(0, 1, gamma)).clamp_min(0);
    const at::Tensor mass = verifiers::RowSums(r);
    const at::Tensor denominator = mass + 1 - w_before.squeeze(1);
    at::Tensor h = at::where(denominator > 0, mass / denominator, at::ones_like(mass));
    h = at::cat({at::ones({1}, options), h.narrow(0, 1, gamma - 1), w.narrow(0, gamma, 1)});  // h_0 = 1, h_γ = w_γ
    const at::Tensor success = at::rand({gamma + 1}, generator, options) < h;
    const at::Tensor tau = (success.to(at::kLong) * at::arange(gamma + 1, options.dtype(at::kLong))).max();
    // Stopping laws: norm(r_i) (p_{i+1} itself where r_i has no mass, a
    // probability-zero branch), and p_{γ+1} at i = γ.
    const at::Tensor stops = at::cat({at::where(mass.unsqueeze(1) > 0, r, p.narrow(0, 0, gamma)), p.narrow(0, gamma, 1)});
    return verifiers::ChainAnswer(tau, SampleRows(stops, generator));
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
