#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(RejectionVerifierTest, TraitsAreHonest) {
  auto verifier = MakeVerifier("rejection");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  EXPECT_TRUE(verifier->traits().chain_only);
}

TEST(RejectionVerifierTest, LosslessOnChains) {
  auto verifier = MakeVerifier("rejection");
  ASSERT_NE(verifier, nullptr);
  std::vector<Instance> instances = Catalogue(DraftMode::kIndependent, /*chains_only=*/true);
  for (const Instance& instance : Catalogue(DraftMode::kWithoutReplacement, true)) instances.push_back(instance);
  // Deterministic drafts are fine once handed over with q = one-hot(token) (§0).
  for (const Instance& instance : Catalogue(DraftMode::kTopKOneHot, true)) instances.push_back(instance);
  ExpectLossless(*verifier, instances, "rejection (chains)");
}

TEST(RejectionVerifierTest, AcceptanceIsOneMinusTotalVariation) {
  auto verifier = MakeVerifier("rejection");
  ASSERT_NE(verifier, nullptr);
  const Instance instance = MakeInstance({1}, 5, DraftMode::kIndependent, 3);
  enumeration::TableModel p(instance.target), q(instance.draft);
  double beta = 0;
  for (int x = 0; x < 5; ++x) beta += std::min(p.Row({0})[x], q.Row({0})[x]);
  EXPECT_NEAR(ExpectedAccepted(*verifier, instance), beta,
              kLosslessTolerance);  // §5.1
}

TEST(RejectionVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("rejection");
  ASSERT_NE(verifier, nullptr);
  for (int depth : {1, 2, 3}) {
    Instance instance = MakeInstance(std::vector<int>(depth, 1), 4, DraftMode::kIndependent, 5 + depth);
    instance.target.one_hot = instance.draft.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
    instance.draft.one_hot = false;  // a drafter sampling at T > 0 against a greedy target
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
  }
}

TEST(RejectionVerifierTest, RefusesTreesTokenOnlyDraftsAndMissingRows) {
  auto verifier = MakeVerifier("rejection");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({2}, 4, DraftMode::kIndependent, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({1, 1}, 4, DraftMode::kTopK, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  Instance missing_rows = MakeInstance({1, 1}, 4, DraftMode::kTopK, 1);
  missing_rows.declared_sampling = DraftSampling::kIndependent;
  enumeration::InstanceModels models(missing_rows);
  SeededRandomSource random(1);
  auto drafted = enumeration::DraftTree(missing_rows, models.draft, random);
  ASSERT_TRUE(drafted.ok());
  VerificationProblem problem = enumeration::MakeProblem(missing_rows, models.target, *drafted);
  problem.draft = ProbabilityRows();
  EXPECT_EQ(verifier->Verify(problem, random).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RejectionVerifierTest, NegativeControlTopKWithTheDraftersSoftmaxIsLossy) {
  // §0's most common bug: argmax/top-k drafts verified with the drafter's softmax as q.
  auto verifier = MakeVerifier("rejection");
  ASSERT_NE(verifier, nullptr);
  std::vector<Instance> instances = Catalogue(DraftMode::kTopK, true);
  for (Instance& instance : instances) instance.declared_sampling = DraftSampling::kIndependent;
  EXPECT_GT(MaxLawError(*verifier, instances), kLossyThreshold);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
