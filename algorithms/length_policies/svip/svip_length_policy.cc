// `svip`: SVIP's self-verification length policy (docs/algorithms.md §3.12):
// after each drafted token, stop once sqrt(gamma · H) exceeds `threshold`,
// where H is the entropy (nats) of the drafter's own distribution the token
// was drafted from (DraftProgress::draft_entropy, before the sampling warp);
// the token is kept; never more than `max` tokens. The rule and its defaults
// (0.15, 0.3, 40) are those of the authors' code; it is AdaEDL's form with
// λ = 1 - threshold and no adaptation.
//
//   length_policy: {type: svip, gamma: 0.15, threshold: 0.3, max: 40}
//
// The decision reads only the drafter's side: lossless. With the chain
// builder only; step by step on the host (one read a token), pipelined
// through its device form (svip_device.cc).
#include <memory>

#include "algorithms/length_policies/svip/svip_options.h"
#include "framework/core/length_policy.h"
#include "framework/core/status_macros.h"

namespace speclab::svip {
namespace {

class SvipLengthPolicy final : public DraftLengthPolicy {
 public:
  explicit SvipLengthPolicy(const SvipOptions& options) : options_(options) {}

  int MaxDraftLength() override { return options_.max; }
  bool wants_progress() const override { return true; }
  bool ContinueDrafting(const DraftProgress& progress) override {
    return !StopsAt(options_, progress.draft_entropy);
  }

 private:
  const SvipOptions options_;
};

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "svip",
    .description = "SVIP: stop drafting once sqrt(gamma * H(drafter)) exceeds a threshold",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> {
      ASSIGN_OR_RETURN(SvipOptions o, ReadSvipOptions(options));
      return std::unique_ptr<DraftLengthPolicy>(std::make_unique<SvipLengthPolicy>(o));
    },
});

}  // namespace
}  // namespace speclab::svip
