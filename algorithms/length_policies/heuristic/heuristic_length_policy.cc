// `heuristic`: Hugging Face assisted generation's schedule (docs/algorithms.md
// §3.2): after a step whose drafts were all accepted, draft two more next
// time; otherwise one fewer, never below one. Its length moves every step:
// step by step it observes each step before the next; pipelined (chains) it
// observes each step one step late, and the run says so.
#include <algorithm>
#include <memory>

#include "framework/core/length_policy.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

class HeuristicLengthPolicy final : public DraftLengthPolicy {
 public:
  HeuristicLengthPolicy(int initial, int max, bool transient)
      : initial_(initial), max_(max), transient_(transient), length_(initial) {}

  int MaxDraftLength() override { return length_; }
  int MaxDraftLengthBound() override { return max_; }
  bool may_observe_late() const override { return true; }
  void Observe(const StepOutcome& outcome) override {
    length_ = outcome.accepted >= outcome.drafted ? std::min(length_ + 2, max_) : std::max(length_ - 1, 1);
  }
  // HF's "heuristic" keeps the length from one prompt to the next;
  // "heuristic_transient" starts each prompt afresh.
  void Reset() override {
    if (transient_) length_ = initial_;
  }

 private:
  const int initial_, max_;
  const bool transient_;
  int length_;
};

const bool kRegistered = LengthPolicyRegistry::Add({
    .name = "heuristic",
    .description = "Hugging Face's schedule: +2 after a fully accepted step, else -1 (at least 1)",
    .lossless = "lossless",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> {
      ASSIGN_OR_RETURN(int64_t initial, options.GetInt("initial", 5));
      ASSIGN_OR_RETURN(int64_t max, options.GetInt("max", 64));
      ASSIGN_OR_RETURN(bool transient, options.GetBool("transient", false));
      if (max < 1 || max > 64) return options.Error("max", "expected an integer in [1, 64]");
      if (initial < 1 || initial > max) return options.Error("initial", "expected an integer in [1, max]");
      return std::unique_ptr<DraftLengthPolicy>(
          std::make_unique<HeuristicLengthPolicy>(static_cast<int>(initial), static_cast<int>(max), transient));
    },
});

}  // namespace
}  // namespace speclab
