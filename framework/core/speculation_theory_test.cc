#include "framework/core/speculation_theory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "framework/core/float_bounds.h"

namespace speclab::theory {
namespace {

using ::testing::HasSubstr;

// Sums of a few terms in double: within a few ulps of the exact value.
constexpr double kRounding = 64 * float_bounds::kFloat64Roundoff;

TEST(SpeculationTheoryTest, ChainsFollowLeviathansFormulas) {
  EXPECT_NEAR(ChainExpectedTokens(0.5, 2), 1.75, kRounding);  // 1 + 0.5 + 0.25
  EXPECT_DOUBLE_EQ(ChainExpectedTokens(0.0, 5), 1.0);
  EXPECT_DOUBLE_EQ(ChainExpectedTokens(1.0, 4), 5.0);
  // Against the definition: Σ_{i=0..γ} α^i.
  for (double alpha : {0.1, 0.6, 0.9, 0.99})
    for (int gamma : {1, 3, 8}) {
      double sum = 0;
      for (int i = 0; i <= gamma; ++i) sum += std::pow(alpha, i);
      EXPECT_NEAR(ChainExpectedTokens(alpha, gamma), sum, kRounding * sum) << alpha << " " << gamma;
      EXPECT_NEAR(ChainWalltimeImprovement(alpha, gamma, 0.05), sum / (gamma * 0.05 + 1), kRounding * sum);
    }
  // A free drafter (c = 0) and a perfect one gain γ + 1.
  EXPECT_DOUBLE_EQ(ChainWalltimeImprovement(1.0, 7, 0.0), 8.0);
}

TEST(SpeculationTheoryTest, OptimalChainLengthBeatsItsNeighbours) {
  for (double alpha : {0.5, 0.7, 0.8, 0.9})
    for (double c : {0.01, 0.05, 0.1, 0.2}) {
      const int best = OptimalChainLength(alpha, c, 64);
      ASSERT_GE(best, 1) << alpha << " " << c;
      for (int gamma = 1; gamma <= 64; ++gamma)
        EXPECT_GE(ChainWalltimeImprovement(alpha, best, c), ChainWalltimeImprovement(alpha, gamma, c));
    }
  // More acceptance, cheaper drafts: longer chains.
  EXPECT_LT(OptimalChainLength(0.6, 0.05, 64), OptimalChainLength(0.9, 0.05, 64));
  EXPECT_LT(OptimalChainLength(0.8, 0.2, 64), OptimalChainLength(0.8, 0.01, 64));
  // A drafter as slow as the target never pays (α < 1).
  EXPECT_EQ(OptimalChainLength(0.9, 1.0, 64), 0);
}

// docs/algorithms.md §5.3's table: the best γ in 1..20 and its speedup.
TEST(SpeculationTheoryTest, ReproducesTheDocsTableOfOptimalLengths) {
  struct Cell {
    double c, alpha;
    int gamma;
    double speedup;  // as printed, to 2 decimals
  };
  const Cell table[] = {{0.01, 0.5, 5, 1.88}, {0.01, 0.6, 7, 2.30}, {0.01, 0.7, 9, 2.97}, {0.01, 0.8, 14, 4.23},
                        {0.01, 0.9, 20, 7.42}, {0.10, 0.5, 2, 1.46}, {0.10, 0.6, 3, 1.67}, {0.10, 0.7, 4, 1.98},
                        {0.10, 0.8, 6, 2.47}, {0.10, 0.9, 10, 3.43}, {0.50, 0.6, 1, 1.07}, {0.50, 0.7, 1, 1.13},
                        {0.50, 0.8, 2, 1.22}, {0.50, 0.9, 3, 1.38}};
  for (const Cell& cell : table) {
    const int gamma = OptimalChainLength(cell.alpha, cell.c, 20);
    EXPECT_EQ(gamma, cell.gamma) << "c=" << cell.c << " alpha=" << cell.alpha;
    EXPECT_NEAR(ChainWalltimeImprovement(cell.alpha, gamma, cell.c), cell.speedup, 0.005 + kRounding)
        << "c=" << cell.c << " alpha=" << cell.alpha;
  }
  // c = 0.5, α = 0.5: γ = 1 only ties autoregressive decoding (1.5 / 1.5), so no length pays.
  EXPECT_EQ(OptimalChainLength(0.5, 0.5, 20), 0);
}

TEST(SpeculationTheoryTest, TreesSumTheirPathsAcceptance) {
  const std::vector<double> p = {0.6, 0.2, 0.1};
  // A chain of 3 at rank 0 is the chain formula with α = p_0.
  EXPECT_NEAR(TreeExpectedTokens({{0}, {0, 0}, {0, 0, 0}}, p), ChainExpectedTokens(0.6, 3), kRounding);
  // Two root children, one grandchild: 1 + 0.6 + 0.2 + 0.6·0.6.
  EXPECT_NEAR(TreeExpectedTokens({{0}, {1}, {0, 0}}, p), 1 + 0.6 + 0.2 + 0.36, kRounding);
  // Ranks past the vector are never accepted.
  EXPECT_DOUBLE_EQ(TreeExpectedTokens({{3}}, p), 1.0);
}

TEST(SpeculationTheoryTest, OneDraftsOptimumIsOneMinusTotalVariation) {
  const std::vector<double> p = {0.5, 0.3, 0.2, 0.0}, q = {0.1, 0.4, 0.2, 0.3};
  double tv = 0;
  for (size_t i = 0; i < p.size(); ++i) tv += std::abs(p[i] - q[i]) / 2;
  EXPECT_NEAR(*OptimalMultiDraftAcceptance(p, q, 1), 1 - tv, kRounding);
}

TEST(SpeculationTheoryTest, MultiDraftOptimumGrowsWithKAndMeetsItsLimits) {
  const std::vector<double> p = {0.5, 0.3, 0.2}, q = {0.2, 0.2, 0.6};
  double last = 0;
  for (int k = 1; k <= 8; ++k) {
    const double optimum = *OptimalMultiDraftAcceptance(p, q, k);
    EXPECT_GE(optimum, last - kRounding) << k;
    EXPECT_LE(optimum, 1.0);
    last = optimum;
  }
  // With every token in q's support, enough drafts cover everything.
  EXPECT_NEAR(*OptimalMultiDraftAcceptance(p, q, 200), 1.0, 1e-9);
  // The same law: always accepted; disjoint supports: never.
  EXPECT_NEAR(*OptimalMultiDraftAcceptance(p, p, 2), 1.0, kRounding);
  EXPECT_NEAR(*OptimalMultiDraftAcceptance({1, 0}, {0, 1}, 4), 0.0, kRounding);
  // K = 2 by hand for p = (1/2, 1/2), q = (1, 0): the drafts are always token
  // 0, which the output can be only half the time.
  EXPECT_NEAR(*OptimalMultiDraftAcceptance({0.5, 0.5}, {1, 0}, 2), 0.5, kRounding);
}

TEST(SpeculationTheoryTest, BadInputIsRefused) {
  EXPECT_THAT(std::string(OptimalMultiDraftAcceptance({1}, {0.5, 0.5}, 2).status().message()),
              HasSubstr("one vocabulary"));
  EXPECT_THAT(std::string(OptimalMultiDraftAcceptance({1}, {1}, 0).status().message()), HasSubstr("K >= 1"));
  EXPECT_FALSE(OptimalMultiDraftAcceptance(std::vector<double>(25, 0.04), std::vector<double>(25, 0.04), 2).ok());
}

}  // namespace
}  // namespace speclab::theory
