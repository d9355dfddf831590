#include "algorithms/tree_builders/sequoia/sequoia_dp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "algorithms/tree_builders/common/tree_shape.h"
#include "framework/core/float_bounds.h"

namespace speclab {
namespace tree_builders {
namespace {

// Two float64 evaluations of a tree's value (sums of products of acceptance
// probabilities over at most 128 nodes of depth at most 21) agree within
// twice gamma(128 * 21) of the value (all terms non-negative).
double ValueRounding(double value) {
  return 2 * float_bounds::Gamma(128 * 21, float_bounds::kFloat64Roundoff) * std::abs(value);
}
// Values read from a table of 3 decimals: half a unit of the last place.
constexpr double kThreeDecimals = 0.5e-3;

const std::vector<double> kAcceptance = {.65, .10, .05, .03, .02, .015, .01, .008};

// docs/algorithms.md §5.4: optimal trees for kAcceptance (an invented worked
// example, not a table of the paper), depth <= 20.
TEST(SequoiaDpTest, MatchesTheWorkedExampleOfSection54) {
  const std::vector<int> budgets = {2, 4, 8, 16, 32, 64, 128};
  const std::vector<double> expected = {1.650, 2.347, 2.817, 3.205, 3.588, 3.969, 4.333};
  auto table = SequoiaTable::Compute(kAcceptance, 128, /*max_levels=*/21);
  ASSERT_TRUE(table.ok()) << table.status();
  for (size_t i = 0; i < budgets.size(); ++i) {
    const double value = table->BestAtMost(budgets[i], 21);
    std::printf("[ sequoia  ] budget %3d: F = %.4f (table %.3f)\n", budgets[i], value, expected[i]);
    EXPECT_NEAR(value, expected[i], kThreeDecimals) << "budget " << budgets[i];
    // The reconstructed tree is valid and has the DP's value.
    const auto choices = table->TreeAtMost(budgets[i], 21);
    auto shape = ShapeFromChoices(choices);
    ASSERT_TRUE(shape.ok()) << shape.status();
    EXPECT_EQ(shape->FirstRankGap(), -1);
    EXPECT_LE(shape->size(), budgets[i]);
    EXPECT_LE(shape->max_depth(), 20);
    EXPECT_NEAR(TreeValue(choices, kAcceptance), value, ValueRounding(value));
  }
}

// The chain row of §5.4: one child per node (p_1 only).
TEST(SequoiaDpTest, ChainsSaturateAsInSection54) {
  const std::vector<int> budgets = {2, 4, 8, 16, 32, 64, 128};
  const std::vector<double> expected = {1.650, 2.347, 2.766, 2.854, 2.857, 2.857, 2.857};
  auto table = SequoiaTable::Compute({.65}, 128, 21);
  ASSERT_TRUE(table.ok());
  for (size_t i = 0; i < budgets.size(); ++i)
    EXPECT_NEAR(table->BestAtMost(budgets[i], 21), expected[i], kThreeDecimals) << "budget " << budgets[i];
}

using Choices = std::vector<std::vector<int64_t>>;

// Every ordered forest of `nodes` nodes hanging below `path` (its first
// root of rank `rank`), at most `levels` levels deep, as choices.
std::vector<Choices> Forests(int nodes, int levels, const std::vector<int64_t>& path, int64_t rank) {
  if (nodes == 0) return {Choices{}};
  if (levels == 0) return {};
  std::vector<Choices> out;
  std::vector<int64_t> child = path;
  child.push_back(rank);
  // The first root's subtree takes s nodes, the later siblings the rest.
  for (int s = 1; s <= nodes; ++s) {
    for (const Choices& below : Forests(s - 1, levels - 1, child, 0)) {
      for (const Choices& rest : Forests(nodes - s, levels, path, rank + 1)) {
        Choices tree{child};
        tree.insert(tree.end(), below.begin(), below.end());
        tree.insert(tree.end(), rest.begin(), rest.end());
        out.push_back(tree);
      }
    }
  }
  return out;
}

// Every ordered tree with exactly m nodes and at most `levels` levels.
std::vector<Choices> AllTrees(int m, int levels) { return Forests(m - 1, levels - 1, {}, 0); }

TEST(SequoiaDpTest, MatchesBruteForceUpToEightNodes) {
  std::mt19937_64 engine(3);
  std::vector<std::vector<double>> vectors = {kAcceptance, {.3, .3, .2}, {.9}, {.5, 0.0, .4}};
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<double> p(4);
    double left = 1.0;
    for (double& v : p) {
      v = std::uniform_real_distribution<double>(0, left)(engine);
      left -= v;
    }
    vectors.push_back(p);
  }
  for (const auto& p : vectors) {
    auto table = SequoiaTable::Compute(p, 8, 8);
    ASSERT_TRUE(table.ok());
    for (int m = 1; m <= 8; ++m) {
      for (int levels = 1; levels <= 5; ++levels) {
        const std::vector<Choices> trees = AllTrees(m, levels);
        double best = -INFINITY;
        for (const auto& choices : trees) {
          bool fits = true;  // ranks beyond p cannot be drafted
          for (const auto& path : choices)
            if (path.back() >= static_cast<int64_t>(p.size())) fits = false;
          if (fits) best = std::max(best, TreeValue(choices, p));
        }
        if (std::isinf(best)) {
          EXPECT_TRUE(std::isinf(table->Best(m, levels))) << "m " << m << " levels " << levels;
        } else {
          EXPECT_NEAR(table->Best(m, levels), best, ValueRounding(best)) << "m " << m << " levels " << levels;
        }
      }
    }
  }
}

TEST(SequoiaDpTest, EnumeratesTheCatalanNumberOfTrees) {
  const std::vector<Choices> trees = AllTrees(8, 8);
  EXPECT_EQ(trees.size(), 429u);  // ordered trees with 8 nodes: Catalan(7)
  for (const auto& choices : trees) ASSERT_TRUE(ShapeFromChoices(choices).ok());
}

TEST(SequoiaDpTest, HardwareAwareChoiceMinimisesTimePerToken) {
  auto table = SequoiaTable::Compute(kAcceptance, 32, 11);
  ASSERT_TRUE(table.ok());
  // Sequoia's demo profile (§2.5): flat target cost up to 4 tokens, draft 0.3 ms.
  LatencyProfile profile{.budgets = {1, 2, 4, 8, 16, 32}, .target_ms = {10, 10, 10, 12, 14, 18}, .draft_ms = 0.3};
  auto choice = ChooseHardwareAware(*table, profile);
  ASSERT_TRUE(choice.ok()) << choice.status();
  double best = INFINITY;
  for (size_t i = 1; i < profile.budgets.size(); ++i)
    for (int d = 2; d <= 11; ++d)
      best = std::min(best, (d * profile.draft_ms + profile.target_ms[i]) / table->BestAtMost(profile.budgets[i], d));
  EXPECT_DOUBLE_EQ(choice->ms_per_token, best);
  EXPECT_NEAR(TreeValue(choice->choices, kAcceptance), choice->value, ValueRounding(choice->value));
  std::printf(
      "[ sequoia  ] demo profile: n=%d d=%d F=%.3f %.3f ms/token, "
      "predicted speedup %.2fx\n",
      choice->budget, choice->levels, choice->value, choice->ms_per_token, 10.0 / choice->ms_per_token);
  // A flat, cheap target favours the largest budget.
  LatencyProfile flat{.budgets = {2, 32}, .target_ms = {10, 10}, .draft_ms = 0.0};
  EXPECT_EQ(ChooseHardwareAware(*table, flat)->budget, 32);
}

TEST(SequoiaDpTest, RejectsInvalidAcceptance) {
  EXPECT_FALSE(SequoiaTable::Compute({}, 8, 4).ok());
  EXPECT_FALSE(SequoiaTable::Compute({1.5}, 8, 4).ok());
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
