// Sequoia's dynamic program for the tree that maximises the expected number
// of tokens per step under positional acceptance (docs/algorithms.md §2.5,
// §5.4), and its hardware-aware choice of size and depth.
//
// p_k = P(the k-th sampled child is the accepted one), k = 1..W. The value of
// a tree is F(T) = Σ_{v∈T} Π_{edges e on root→v} p_{rank(e)} (root = 1). With
// T[m][l][b] the best value of a tree of m nodes, at most l levels (the root
// is level 1) and exactly b root children:
//   T[1][l][0] = 1
//   T[m][l][1] = 1 + p_1 · max_b' T[m−1][l−1][b']
//   T[m][l][b] = max_{1≤y<m} T[y][l][b−1] + p_b · max_b' T[m−y][l−1][b']   (b ≥ 2)
// where the b-th child's subtree has m−y nodes. Children use ranks 1..b
// contiguously, as draws without replacement do; b ≤ W.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_SEQUOIA_SEQUOIA_DP_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_SEQUOIA_SEQUOIA_DP_H_

#include <cstdint>
#include <vector>

#include "framework/core/latency_profile.h"

#include "absl/status/statusor.h"

namespace speclab {
namespace tree_builders {

class SequoiaTable {
 public:
  // `acceptance` is p_1..p_W; trees of up to `max_nodes` nodes (root included)
  // and `max_levels` levels (root included).
  static absl::StatusOr<SequoiaTable> Compute(std::vector<double> acceptance, int max_nodes, int max_levels);

  int max_nodes() const { return max_nodes_; }
  int max_levels() const { return max_levels_; }
  // Best F with exactly m nodes and at most `levels` levels; -inf if no such tree.
  double Best(int m, int levels) const;
  // Best F with at most n nodes (F never decreases with m, but a zero p_k can
  // make a larger tree merely as good; the smallest such tree is returned).
  double BestAtMost(int n, int levels) const;
  // An optimal tree with at most n nodes as choices (0-based rank paths,
  // root excluded), prefix-closed with contiguous ranks.
  std::vector<std::vector<int64_t>> TreeAtMost(int n, int levels) const;

 private:
  SequoiaTable(std::vector<double> p, int max_nodes, int max_levels);
  size_t Index(int m, int l, int b) const;
  int BestChildren(int m, int l) const;
  int SmallestBest(int n, int levels) const;
  void EmitChildren(int m, int l, int b, std::vector<int64_t>& path, std::vector<std::vector<int64_t>>& out) const;

  std::vector<double> p_;
  int max_nodes_, max_levels_, width_;
  std::vector<double> value_;  // T[m][l][b]
  std::vector<int> split_;     // argmax y of T[m][l][b], b >= 2
};

// F(T) of a tree given as choices, straight from the definition.
double TreeValue(const std::vector<std::vector<int64_t>>& choices, const std::vector<double>& acceptance);

// Measured latencies (framework/core/latency_profile.h): the target's
// forward over n tree tokens (n counts the root), one drafter forward (one
// tree level).
using ::speclab::LatencyProfile;

struct SequoiaChoice {
  int budget = 0;       // n, root included
  int levels = 0;       // d, root level included
  double value = 0;     // F of the chosen tree (expected tokens per step)
  double step_ms = 0;   // predicted d·t_draft + t_target(n)
  double ms_per_token = 0;
  std::vector<std::vector<int64_t>> choices;
};

// Minimises (d·t_draft + t_target(n)) / F over the profile's budgets n >= 2
// and d = 2..table.max_levels() (§2.5; d counts the root level).
absl::StatusOr<SequoiaChoice> ChooseHardwareAware(const SequoiaTable& table, const LatencyProfile& profile);

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_SEQUOIA_SEQUOIA_DP_H_
