#include "algorithms/verifiers/testing/choice_enumerator.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/random_source.h"

namespace speclab {
namespace enumeration {
namespace {

struct Branch {
  int value;           // 1/0 for a Bernoulli, the index for a Categorical
  double probability;  // of taking this branch at this choice point
};

struct ChoicePoint {
  std::vector<Branch> branches;
  size_t taken = 0;
};

// Replays the recorded prefix of choices, then extends it with first branches.
class EnumeratingRandomSource final : public RandomSource {
 public:
  explicit EnumeratingRandomSource(int max_choices) : max_choices_(max_choices) {}

  void StartRun() {
    cursor_ = 0;
    probability_ = 1.0;
    error_ = absl::OkStatus();
  }

  bool Bernoulli(double probability) override {
    const double a = std::clamp(probability, 0.0, 1.0);
    std::vector<Branch> branches;
    if (a > 0.0) branches.push_back({1, a});
    if (a < 1.0) branches.push_back({0, 1.0 - a});
    return Choose(std::move(branches)) == 1;
  }

  int Categorical(absl::Span<const double> weights) override {
    double total = 0;
    for (double w : weights) total += std::max(w, 0.0);
    std::vector<Branch> branches;
    if (total > 0.0) {
      for (size_t i = 0; i < weights.size(); ++i)
        if (weights[i] > 0.0) branches.push_back({static_cast<int>(i), weights[i] / total});
    }
    if (branches.empty()) {
      Fail(absl::InvalidArgumentError("Categorical called with no positive weight"));
      return 0;
    }
    return Choose(std::move(branches));
  }

  double probability() const { return probability_; }
  const absl::Status& error() const { return error_; }

  // Moves to the next unexplored sequence; false when all were explored.
  bool Advance() {
    // Choices past the cursor belong to an abandoned run; drop them.
    stack_.resize(std::min(stack_.size(), cursor_));
    while (!stack_.empty() && stack_.back().taken + 1 >= stack_.back().branches.size()) stack_.pop_back();
    if (stack_.empty()) return false;
    ++stack_.back().taken;
    return true;
  }

 private:
  int Choose(std::vector<Branch> branches) {
    if (!error_.ok()) return branches.empty() ? 0 : branches.front().value;
    if (cursor_ >= static_cast<size_t>(max_choices_)) {
      Fail(absl::ResourceExhaustedError(absl::StrCat("more than ", max_choices_, " choices in one run")));
      return branches.front().value;
    }
    if (cursor_ == stack_.size()) {
      stack_.push_back({std::move(branches), 0});
    } else if (!SameQuestion(stack_[cursor_].branches, branches)) {
      Fail(absl::InternalError("program is not deterministic given its choices (replay diverged)"));
      return branches.front().value;
    }
    const Branch& branch = stack_[cursor_].branches[stack_[cursor_].taken];
    ++cursor_;
    probability_ *= branch.probability;
    return branch.value;
  }

  static bool SameQuestion(const std::vector<Branch>& a, const std::vector<Branch>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].value != b[i].value || a[i].probability != b[i].probability) return false;
    return true;
  }

  void Fail(absl::Status status) {
    if (error_.ok()) error_ = std::move(status);
  }

  int max_choices_;
  std::vector<ChoicePoint> stack_;
  size_t cursor_ = 0;
  double probability_ = 1.0;
  absl::Status error_;
};

}  // namespace

absl::Status EnumerateChoices(const std::function<absl::Status(RandomSource&)>& run,
                              const std::function<absl::Status(double probability)>& record,
                              const EnumerationLimits& limits) {
  EnumeratingRandomSource source(limits.max_choices_per_run);
  int64_t runs = 0;
  do {
    if (++runs > limits.max_runs)
      return absl::ResourceExhaustedError(absl::StrCat("more than ", limits.max_runs, " enumerated runs"));
    source.StartRun();
    absl::Status status = run(source);
    if (!source.error().ok()) return source.error();
    if (!status.ok()) return status;
    if (absl::Status recorded = record(source.probability()); !recorded.ok()) return recorded;
  } while (source.Advance());
  return absl::OkStatus();
}

}  // namespace enumeration
}  // namespace speclab
