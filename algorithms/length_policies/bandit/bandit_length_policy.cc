// `bandit`: the draft length as a multi-armed bandit (BanditSpec, Hou et al.,
// ICML 2025: UCB; Thompson sampling added; docs/algorithms.md §3.6). Each arm
// is a length; a step pulls one and is rewarded with the tokens it emitted
// per second of its wall time (accepted drafts + the extra token, over
// StepOutcome::step_seconds; per step where no time was measured).
//
//   length_policy: {type: bandit, arms: [1, 2, 4, 6, 8], algorithm: ucb}
//   length_policy: {type: bandit, arms: [2, 4, 8], algorithm: thompson, seed: 7}
//
// ucb: every arm once, in order, then the largest mean + c·R·sqrt(2 ln t / n)
// (UCB1 with rewards scaled by R, the largest seen; c = `exploration`).
// thompson: every arm once, then the largest draw from N(mean, R² / (n + 1))
// per arm, from the policy's own generator (`seed`). Either way a decision
// reads only earlier steps' outcomes and the policy's own randomness, never
// the verifier's: lossless (§1.3.5). What it learned carries over to the
// next prompt unless `transient: true`. Its length moves from step to step:
// step by step it observes each step before the next; pipelined (chains) one
// step late, as `heuristic`.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

enum class Algorithm { kUcb, kThompson };

class BanditLengthPolicy final : public DraftLengthPolicy {
 public:
  BanditLengthPolicy(std::vector<int> arms, Algorithm algorithm, double exploration, uint64_t seed, bool per_second,
                     bool transient)
      : arms_(std::move(arms)),
        algorithm_(algorithm),
        exploration_(exploration),
        seed_(seed),
        per_second_(per_second),
        transient_(transient) {
    Forget();
  }

  int MaxDraftLength() override {
    if (!chosen_) chosen_ = Choose();
    return arms_[*chosen_];
  }
  int MaxDraftLengthBound() override { return *std::max_element(arms_.begin(), arms_.end()); }
  bool may_observe_late() const override { return true; }

  // The step is credited to the arm of the length it drafted (the arms are
  // distinct): observed one step late (pipelined), the arm chosen last may be
  // the next step's.
  void Observe(const StepOutcome& outcome) override {
    const auto drafted = std::find(arms_.begin(), arms_.end(), outcome.drafted);
    const int arm = drafted != arms_.end() ? static_cast<int>(drafted - arms_.begin()) : chosen_ ? *chosen_ : Choose();
    chosen_.reset();
    const double tokens = outcome.accepted + 1.0;
    const double reward = per_second_ && outcome.step_seconds > 0 ? tokens / outcome.step_seconds : tokens;
    ++pulls_[arm];
    sums_[arm] += reward;
    ++steps_;
    scale_ = std::max(scale_, reward);
  }

  void Reset() override {
    chosen_.reset();
    if (transient_) Forget();
  }

 private:
  void Forget() {
    pulls_.assign(arms_.size(), 0);
    sums_.assign(arms_.size(), 0.0);
    steps_ = 0;
    scale_ = 0;
    generator_.seed(seed_);
  }

  // The arm for the coming step.
  int Choose() {
    for (size_t a = 0; a < arms_.size(); ++a)
      if (pulls_[a] == 0) return static_cast<int>(a);  // every arm once, in order
    int best = 0;
    double best_index = -INFINITY;
    for (size_t a = 0; a < arms_.size(); ++a) {
      const double n = pulls_[a], mean = sums_[a] / n;
      double index;
      if (algorithm_ == Algorithm::kUcb) {
        index = mean + exploration_ * scale_ * std::sqrt(2.0 * std::log(static_cast<double>(steps_)) / n);
      } else {
        index = std::normal_distribution<double>(mean, scale_ / std::sqrt(n + 1.0))(generator_);
      }
      if (index > best_index) {  // ties: the earlier arm
        best_index = index;
        best = static_cast<int>(a);
      }
    }
    return best;
  }

  const std::vector<int> arms_;
  const Algorithm algorithm_;
  const double exploration_;
  const uint64_t seed_;
  const bool per_second_, transient_;
  std::vector<int64_t> pulls_;
  std::vector<double> sums_;
  int64_t steps_ = 0;
  double scale_ = 0;  // the largest reward seen: the rewards' unit
  std::optional<int> chosen_;
  std::mt19937_64 generator_;
};

absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> Create(Options& options) {
  ASSIGN_OR_RETURN(std::vector<int64_t> arms, options.GetIntList("arms", std::vector<int64_t>{1, 2, 4, 6, 8}));
  if (arms.empty()) return options.Error("arms", "expected at least one draft length");
  std::vector<int> lengths;
  for (int64_t a : arms) {
    if (a < 1 || a > 64) return options.Error("arms", absl::StrCat("draft length ", a, " outside [1, 64]"));
    if (std::find(lengths.begin(), lengths.end(), a) != lengths.end())
      return options.Error("arms", absl::StrCat("draft length ", a, " listed twice"));
    lengths.push_back(static_cast<int>(a));
  }
  ASSIGN_OR_RETURN(std::string algorithm, options.GetString("algorithm", "ucb"));
  if (algorithm != "ucb" && algorithm != "thompson")
    return options.Error("algorithm", absl::StrCat("expected ucb or thompson, got '", algorithm, "'"));
  ASSIGN_OR_RETURN(double exploration, options.GetDouble("exploration", 1.0));
  if (!(exploration >= 0)) return options.Error("exploration", "expected a number >= 0");
  ASSIGN_OR_RETURN(int64_t seed, options.GetInt("seed", 1));
  ASSIGN_OR_RETURN(std::string reward, options.GetString("reward", "tokens_per_second"));
  if (reward != "tokens_per_second" && reward != "tokens_per_step")
    return options.Error("reward", absl::StrCat("expected tokens_per_second or tokens_per_step, got '", reward, "'"));
  ASSIGN_OR_RETURN(bool transient, options.GetBool("transient", false));
  return std::unique_ptr<DraftLengthPolicy>(std::make_unique<BanditLengthPolicy>(
      std::move(lengths), algorithm == "ucb" ? Algorithm::kUcb : Algorithm::kThompson, exploration,
      static_cast<uint64_t>(seed), reward == "tokens_per_second", transient));
}

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "bandit",
    .description = "BanditSpec: draft lengths as bandit arms (UCB or Thompson), rewarded by tokens per second",
    .lossless = "lossless",
    .create = Create,
});

}  // namespace
}  // namespace speclab
