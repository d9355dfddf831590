// `entropy`: AdaEDL's early draft stop (docs/algorithms.md §3.5): after each
// drafted token, stop once 1 - sqrt(γ_e · H), a lower-bound estimate of that
// token's acceptance from the entropy H of the drafter's own distribution
// there (DraftProgress::draft_entropy, nats, before the sampling warp), is
// below λ; the token is kept; never more than `max` tokens.
//
//   length_policy: {type: entropy, gamma_e: 0.2, threshold: 0.4, max: 8}
//
// λ stays fixed: AdaEDL adapts it online from observed acceptance, by a rule
// speclab does not have verified. The decision reads only the drafter's side:
// lossless. With the chain builder only; step by step on the host (one read a
// token), pipelined through its device form (entropy_device.cc).
#include <memory>

#include "algorithms/length_policies/entropy/entropy_options.h"
#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"

namespace speclab::entropy {
namespace {

class EntropyLengthPolicy final : public DraftLengthPolicy {
 public:
  explicit EntropyLengthPolicy(const EntropyOptions& options) : options_(options) {}

  int MaxDraftLength() override { return options_.max; }
  bool wants_progress() const override { return true; }
  bool ContinueDrafting(const DraftProgress& progress) override {
    return !StopsAt(options_, progress.draft_entropy);
  }

 private:
  const EntropyOptions options_;
};

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "entropy",
    .description = "AdaEDL: stop drafting once 1 - sqrt(gamma_e * H(drafter)) falls below a threshold",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> {
      ASSIGN_OR_RETURN(EntropyOptions o, ReadEntropyOptions(options));
      return std::unique_ptr<DraftLengthPolicy>(std::make_unique<EntropyLengthPolicy>(o));
    },
});

}  // namespace
}  // namespace speclab::entropy
