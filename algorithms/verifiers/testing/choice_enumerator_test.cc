#include "algorithms/verifiers/testing/choice_enumerator.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "framework/core/random_source.h"

namespace speclab {
namespace enumeration {
namespace {

TEST(ExactEnumerationTest, BranchesOnEveryOutcomeWithItsProbability) {
  std::map<std::pair<int, int>, double> law;
  std::pair<int, int> current;
  const std::vector<double> weights = {0.0, 1.0, 3.0};
  ASSERT_TRUE(EnumerateChoices(
                  [&](RandomSource& random) {
                    const int coin = random.Bernoulli(0.25) ? 1 : 0;
                    // The second question depends on the first answer.
                    current = {coin, coin ? random.Categorical(weights) : -1};
                    return absl::OkStatus();
                  },
                  [&](double probability) {
                    law[current] += probability;
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_EQ(law.size(), 3u);  // the zero-weight category is never visited
  EXPECT_DOUBLE_EQ(law[std::make_pair(1, 1)], 0.25 * 0.25);
  EXPECT_DOUBLE_EQ(law[std::make_pair(1, 2)], 0.25 * 0.75);
  EXPECT_DOUBLE_EQ(law[std::make_pair(0, -1)], 0.75);
}

TEST(ExactEnumerationTest, SkipsCertainBernoulliBranches) {
  int runs = 0;
  ASSERT_TRUE(EnumerateChoices(
                  [&](RandomSource& random) {
                    EXPECT_TRUE(random.Bernoulli(1.0));
                    EXPECT_FALSE(random.Bernoulli(0.0));
                    EXPECT_TRUE(random.Bernoulli(7.0));  // clamped
                    return absl::OkStatus();
                  },
                  [&](double probability) {
                    EXPECT_EQ(probability, 1.0);
                    ++runs;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(runs, 1);
}

TEST(ExactEnumerationTest, RefusesCategoricalWithoutMass) {
  const std::vector<double> zeros = {0.0, 0.0};
  const absl::Status status = EnumerateChoices(
      [&](RandomSource& random) {
        random.Categorical(zeros);
        return absl::OkStatus();
      },
      [](double) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExactEnumerationTest, DetectsProgramsThatAreNotReplayable) {
  int calls = 0;
  const absl::Status status = EnumerateChoices(
      [&](RandomSource& random) {
        random.Bernoulli(calls++ == 0 ? 0.5 : 0.4);  // asks a different question on replay
        return absl::OkStatus();
      },
      [](double) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
}

TEST(ExactEnumerationTest, StopsOnRunErrors) {
  const absl::Status status = EnumerateChoices([](RandomSource&) { return absl::InvalidArgumentError("bad"); },
                                               [](double) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace enumeration
}  // namespace speclab
