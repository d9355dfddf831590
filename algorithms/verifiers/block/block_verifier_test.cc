#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(BlockVerifierTest, TraitsAreHonest) {
  auto verifier = MakeVerifier("block");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  EXPECT_TRUE(verifier->traits().chain_only);
}

TEST(BlockVerifierTest, LosslessOnChains) {
  auto verifier = MakeVerifier("block");
  ASSERT_NE(verifier, nullptr);
  std::vector<Instance> instances = Catalogue(DraftMode::kIndependent, true);
  for (DraftMode mode : {DraftMode::kWithoutReplacement, DraftMode::kTopKOneHot})
    for (const Instance& instance : Catalogue(mode, true)) instances.push_back(instance);
  // Longer chains, where block differs most from token-wise rejection.
  for (uint64_t seed : {3u, 4u}) instances.push_back(MakeInstance({1, 1, 1, 1}, 3, DraftMode::kIndependent, seed));
  ExpectLossless(*verifier, instances, "block (chains)");
}

TEST(BlockVerifierTest, NeverAcceptsLessThanTokenWiseRejection) {
  auto block = MakeVerifier("block");
  auto tokenwise = MakeVerifier("rejection");
  ASSERT_NE(block, nullptr);
  ASSERT_NE(tokenwise, nullptr);
  double largest_gain = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    for (int depth : {2, 3}) {
      Instance instance = MakeInstance(std::vector<int>(depth, 1), 3 + seed % 2, DraftMode::kIndependent, 100 + seed);
      if (seed % 3 == 0) instance.target.concentration = instance.draft.concentration = 0.4;
      const double block_accepted = ExpectedAccepted(*block, instance);
      const double tokenwise_accepted = ExpectedAccepted(*tokenwise, instance);
      EXPECT_GE(block_accepted, tokenwise_accepted - kLosslessTolerance) << instance.Describe();
      largest_gain = std::max(largest_gain, block_accepted - tokenwise_accepted);
    }
  }
  std::printf("[ block ] largest E[accepted] gain over token-wise: %.4f\n", largest_gain);
  EXPECT_GT(largest_gain,
            kLossyThreshold);  // strictly better somewhere, far beyond rounding
}

// The paper's own example (Sun et al., ICLR 2025): two tokens, the same p =
// (1/3, 2/3) and q = (2/3, 1/3) at every position, gamma = 2. Token-wise
// rejection accepts 2/3 + (2/3)^2 = 10/9 drafts in expectation, block
// verification 11/9. Exact enumeration: a few dozen products and sums of
// numbers in [0, 1], so rounding stays within kLosslessTolerance.
TEST(BlockVerifierTest, ReproducesTheToyExampleOfSunEtAl) {
  auto block = MakeVerifier("block");
  auto tokenwise = MakeVerifier("rejection");
  ASSERT_NE(block, nullptr);
  ASSERT_NE(tokenwise, nullptr);
  Instance instance = MakeInstance({1, 1}, 2, DraftMode::kIndependent, 1);
  instance.target.constant_row = {1.0 / 3, 2.0 / 3};
  instance.draft.constant_row = {2.0 / 3, 1.0 / 3};
  EXPECT_NEAR(ExpectedAccepted(*tokenwise, instance), 10.0 / 9, kLosslessTolerance);
  EXPECT_NEAR(ExpectedAccepted(*block, instance), 11.0 / 9, kLosslessTolerance);
}

TEST(BlockVerifierTest, AcceptsEverythingWhenDraftEqualsTarget) {
  // The degenerate case of §1.9: w_i = 1 and p = q, so Σr_i + 1 - w_i = 0.
  auto verifier = MakeVerifier("block");
  ASSERT_NE(verifier, nullptr);
  Instance instance = MakeInstance({1, 1, 1}, 3, DraftMode::kIndependent, 5);
  instance.target.constant_row = instance.draft.constant_row = {0.5, 0.3, 0.2};
  auto comparison = enumeration::CheckExactly(*verifier, instance);
  ASSERT_TRUE(comparison.ok()) << comparison.status();
  EXPECT_LT(comparison->max_abs_error, kLosslessTolerance);
  EXPECT_NEAR(comparison->expected_accepted, 3.0, kLosslessTolerance);
}

TEST(BlockVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("block");
  ASSERT_NE(verifier, nullptr);
  for (int depth : {1, 2, 3, 4}) {
    Instance instance = MakeInstance(std::vector<int>(depth, 1), 3, DraftMode::kIndependent, 40 + depth);
    instance.target.one_hot = instance.draft.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
    instance.draft.one_hot = false;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
  }
}

TEST(BlockVerifierTest, RefusesTreesAndTokenOnlyDrafts) {
  auto verifier = MakeVerifier("block");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({2, 1}, 4, DraftMode::kIndependent, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({1, 1}, 4, DraftMode::kTopK, 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
