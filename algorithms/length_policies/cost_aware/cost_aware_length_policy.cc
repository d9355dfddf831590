// `cost_aware`: the draft length that maximises the expected tokens a second
// under the acceptance measured so far and a measured latency profile
// (docs/algorithms.md §3.10).
//
//   length_policy: {type: cost_aware, latency_profile_file: results/acceptance.yaml, max: 16}
//
// Each step drafts the γ in [1, max] maximising
//   E[tokens](γ) / cost(γ) = ((1 - α^(γ+1)) / (1 - α)) / (γ t_draft + t_target(γ + 1)),
// the i.i.d. acceptance model of Leviathan et al. (§5.3), with t_draft and
// t_target(n) from the profile (`speclab measure-acceptance` writes one, as
// `sequoia` reads it; LatencyProfile::TargetMs interpolates it). α is the
// acceptance estimated from the steps observed: each drafted token is a
// Bernoulli trial up to the first rejection, so α̂ = accepted / (accepted +
// rejections), counts decayed by `decay` a step and started from `prior`
// with the weight of two trials. Decisions read only past outcomes: lossless.
// Its length moves with them: step by step it observes each step before the
// next; pipelined (chains) one step late.
#include <algorithm>
#include <cmath>
#include <memory>

#include "algorithms/length_policies/cost_aware/cost_aware_model.h"
#include "framework/core/latency_profile.h"
#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"

namespace speclab::cost_aware {
namespace {

class CostAwareLengthPolicy final : public DraftLengthPolicy {
 public:
  CostAwareLengthPolicy(LatencyProfile profile, int max, double prior, double decay, bool transient)
      : profile_(std::move(profile)), max_(max), prior_(prior), decay_(decay), transient_(transient) {
    Restart();
  }

  int MaxDraftLength() override { return length_; }
  int MaxDraftLengthBound() override { return max_; }
  bool may_observe_late() const override { return true; }
  void Observe(const StepOutcome& outcome) override {
    accepted_ = decay_ * accepted_ + outcome.accepted;
    rejections_ = decay_ * rejections_ + (outcome.accepted < outcome.drafted ? 1.0 : 0.0);
    length_ = BestLength(profile_, Acceptance(), max_);
  }
  void Reset() override {
    if (transient_) Restart();
  }

 private:
  // α̂ with the prior counted as two trials.
  double Acceptance() const { return (accepted_ + 2 * prior_) / (accepted_ + rejections_ + 2); }
  void Restart() {
    accepted_ = rejections_ = 0;
    length_ = BestLength(profile_, Acceptance(), max_);
  }

  const LatencyProfile profile_;
  const int max_;
  const double prior_, decay_;
  const bool transient_;
  double accepted_ = 0, rejections_ = 0;
  int length_ = 1;
};

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "cost_aware",
    .description = "the length maximising expected tokens per second under the measured acceptance and latency profile",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> {
      ASSIGN_OR_RETURN(LatencyProfile profile, ReadLatencyProfile(options));
      ASSIGN_OR_RETURN(int64_t max, options.GetInt("max", 16));
      ASSIGN_OR_RETURN(double prior, options.GetDouble("prior", 0.5));
      ASSIGN_OR_RETURN(double decay, options.GetDouble("decay", 0.95));
      ASSIGN_OR_RETURN(bool transient, options.GetBool("transient", false));
      if (max < 1 || max > 64) return options.Error("max", "expected an integer in [1, 64]");
      if (!(prior >= 0 && prior < 1)) return options.Error("prior", "expected an acceptance in [0, 1)");
      if (!(decay > 0 && decay <= 1)) return options.Error("decay", "expected a factor in (0, 1]");
      return std::unique_ptr<DraftLengthPolicy>(std::make_unique<CostAwareLengthPolicy>(
          std::move(profile), static_cast<int>(max), prior, decay, transient));
    },
});

}  // namespace
}  // namespace speclab::cost_aware
