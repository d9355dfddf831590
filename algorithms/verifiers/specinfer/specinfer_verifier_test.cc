#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(SpecInferVerifierTest, TraitsAreHonest) {
  auto verifier = MakeVerifier("specinfer");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  EXPECT_FALSE(verifier->traits().chain_only);
}

TEST(SpecInferVerifierTest, LosslessForIndependentDraftsWithSharedOrPerChildRows) {
  auto verifier = MakeVerifier("specinfer");
  ASSERT_NE(verifier, nullptr);
  std::vector<Instance> instances = Catalogue(DraftMode::kIndependent, false);
  for (DraftMode mode : {DraftMode::kPerChildIndependent, DraftMode::kTopKOneHot})
    for (const Instance& instance : Catalogue(mode, false)) instances.push_back(instance);
  ExpectLossless(*verifier, instances, "specinfer (iid, per-child, one-hot)");
}

TEST(SpecInferVerifierTest, MatchesTheComputedFigure2Setting) {
  auto verifier = MakeVerifier("specinfer");
  ASSERT_NE(verifier, nullptr);
  for (const Figure2Row& row : Figure2Table())
    EXPECT_NEAR(ExpectedAccepted(*verifier, Figure2Instance(row.q2)), row.specinfer, kTableRounding) << "q2=" << row.q2;
}

TEST(SpecInferVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("specinfer");
  ASSERT_NE(verifier, nullptr);
  for (std::vector<int> shape : {std::vector<int>{1, 1, 1}, {2, 1}, {1, 2}, {2, 2}, {3}}) {
    for (DraftMode mode : {DraftMode::kIndependent, DraftMode::kPerChildIndependent}) {
      Instance instance = MakeInstance(shape, 4, mode, 19);
      instance.target.one_hot = instance.draft.one_hot = true;
      EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
      instance.draft.one_hot = false;
      if (mode == DraftMode::kPerChildIndependent) {
        EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
      }
    }
  }
}

TEST(SpecInferVerifierTest, RefusesDraftsItIsNotExactFor) {
  auto verifier = MakeVerifier("specinfer");
  ASSERT_NE(verifier, nullptr);
  for (DraftMode mode : {DraftMode::kWithoutReplacement, DraftMode::kTopK})
    EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({2}, 4, mode, 1)).code(), absl::StatusCode::kInvalidArgument)
        << enumeration::DraftModeName(mode);
}

TEST(SpecInferVerifierTest, NegativeControlWithoutReplacementDraftsDeclaredIndependentAreLossy) {
  auto verifier = MakeVerifier("specinfer");
  ASSERT_NE(verifier, nullptr);
  std::vector<Instance> instances;
  for (Instance instance : Catalogue(DraftMode::kWithoutReplacement, false)) {
    instance.declared_sampling = DraftSampling::kIndependent;
    instances.push_back(instance);
  }
  EXPECT_GT(MaxLawError(*verifier, instances), kLossyThreshold);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
