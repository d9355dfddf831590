#include "algorithms/tree_builders/sequoia/sequoia_dp.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "framework/core/speculation_theory.h"

namespace speclab {
namespace tree_builders {
namespace {

constexpr double kNone = -std::numeric_limits<double>::infinity();

}  // namespace

SequoiaTable::SequoiaTable(std::vector<double> p, int max_nodes, int max_levels)
    : p_(std::move(p)),
      max_nodes_(max_nodes),
      max_levels_(max_levels),
      width_(static_cast<int>(p_.size())),
      value_(static_cast<size_t>(max_nodes + 1) * (max_levels + 1) * (width_ + 1), kNone),
      split_(value_.size(), -1) {}

size_t SequoiaTable::Index(int m, int l, int b) const {
  return (static_cast<size_t>(m) * (max_levels_ + 1) + l) * (width_ + 1) + b;
}

absl::StatusOr<SequoiaTable> SequoiaTable::Compute(std::vector<double> acceptance, int max_nodes, int max_levels) {
  if (acceptance.empty()) return absl::InvalidArgumentError("the acceptance vector is empty");
  for (double p : acceptance)
    if (!(p >= 0 && p <= 1)) return absl::InvalidArgumentError(absl::StrCat("acceptance value ", p, " is not in [0, 1]"));
  if (max_nodes < 1 || max_levels < 1)
    return absl::InvalidArgumentError("a tree needs at least one node and one level");
  SequoiaTable t(std::move(acceptance), max_nodes, max_levels);
  const int w = t.width_;
  // best[m][l] = max_b T[m][l][b], the value of a subtree hanging below an edge.
  std::vector<double> best(static_cast<size_t>(max_nodes + 1) * (max_levels + 1), kNone);
  auto best_at = [&](int m, int l) -> double& { return best[static_cast<size_t>(m) * (max_levels + 1) + l]; };
  for (int l = 1; l <= max_levels; ++l) {
    t.value_[t.Index(1, l, 0)] = 1.0;
    best_at(1, l) = 1.0;
    for (int m = 2; m <= max_nodes; ++m) {
      const double below = best_at(m - 1, l - 1);
      if (below != kNone) t.value_[t.Index(m, l, 1)] = 1.0 + t.p_[0] * below;
      for (int b = 2; b <= w; ++b) {
        double top = kNone;
        int arg = -1;
        // The root and its first b-1 subtrees take y >= b nodes.
        for (int y = b; y < m; ++y) {
          const double left = t.value_[t.Index(y, l, b - 1)];
          const double right = best_at(m - y, l - 1);
          if (left == kNone || right == kNone) continue;
          const double v = left + t.p_[b - 1] * right;
          if (v > top) {
            top = v;
            arg = y;
          }
        }
        t.value_[t.Index(m, l, b)] = top;
        t.split_[t.Index(m, l, b)] = arg;
      }
      for (int b = 0; b <= w; ++b) best_at(m, l) = std::max(best_at(m, l), t.value_[t.Index(m, l, b)]);
    }
  }
  return t;
}

int SequoiaTable::BestChildren(int m, int l) const {
  int arg = -1;
  double top = kNone;
  for (int b = 0; b <= width_; ++b) {
    const double v = value_[Index(m, l, b)];
    if (v > top) {
      top = v;
      arg = b;
    }
  }
  return arg;
}

double SequoiaTable::Best(int m, int levels) const {
  if (m < 1 || m > max_nodes_ || levels < 1 || levels > max_levels_) return kNone;
  double top = kNone;
  for (int b = 0; b <= width_; ++b) top = std::max(top, value_[Index(m, levels, b)]);
  return top;
}

int SequoiaTable::SmallestBest(int n, int levels) const {
  int arg = -1;
  double top = kNone;
  for (int m = 1; m <= std::min(n, max_nodes_); ++m) {
    const double v = Best(m, levels);
    if (v > top) {
      top = v;
      arg = m;
    }
  }
  return arg;
}

double SequoiaTable::BestAtMost(int n, int levels) const {
  const int m = SmallestBest(n, levels);
  return m < 0 ? kNone : Best(m, levels);
}

void SequoiaTable::EmitChildren(int m, int l, int b, std::vector<int64_t>& path,
                                std::vector<std::vector<int64_t>>& out) const {
  if (b == 0) return;
  int last_subtree = m - 1;  // nodes below the b-th child (b == 1)
  if (b >= 2) {
    const int y = split_[Index(m, l, b)];
    EmitChildren(y, l, b - 1, path, out);  // the root's first b-1 children
    last_subtree = m - y;
  }
  path.push_back(b - 1);
  out.push_back(path);
  EmitChildren(last_subtree, l - 1, BestChildren(last_subtree, l - 1), path, out);
  path.pop_back();
}

std::vector<std::vector<int64_t>> SequoiaTable::TreeAtMost(int n, int levels) const {
  std::vector<std::vector<int64_t>> out;
  const int m = SmallestBest(n, levels);
  if (m < 0) return out;
  std::vector<int64_t> path;
  EmitChildren(m, levels, BestChildren(m, levels), path, out);
  return out;
}

double TreeValue(const std::vector<std::vector<int64_t>>& choices, const std::vector<double>& acceptance) {
  return theory::TreeExpectedTokens(choices, acceptance);
}

absl::StatusOr<SequoiaChoice> ChooseHardwareAware(const SequoiaTable& table, const LatencyProfile& profile) {
  if (profile.budgets.size() != profile.target_ms.size() || profile.budgets.empty())
    return absl::InvalidArgumentError("a latency profile needs one target time per budget");
  SequoiaChoice choice;
  choice.ms_per_token = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < profile.budgets.size(); ++i) {
    const int n = profile.budgets[i];
    if (n < 2 || n > table.max_nodes()) continue;
    for (int d = 2; d <= table.max_levels(); ++d) {
      const double value = table.BestAtMost(n, d);
      if (value == kNone) continue;
      const double step = d * profile.draft_ms + profile.target_ms[i];
      if (step / value < choice.ms_per_token) {
        choice = {.budget = n, .levels = d, .value = value, .step_ms = step, .ms_per_token = step / value};
      }
    }
  }
  if (choice.budget == 0)
    return absl::InvalidArgumentError("no budget of the latency profile admits a tree (budgets must be >= 2)");
  choice.choices = table.TreeAtMost(choice.budget, choice.levels);
  return choice;
}

}  // namespace tree_builders
}  // namespace speclab
