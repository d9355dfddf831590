#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(RrsVerifierTest, TraitsAreHonest) {
  auto verifier = MakeVerifier("rrs");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  EXPECT_FALSE(verifier->traits().chain_only);
}

TEST(RrsVerifierTest, LosslessForIidSiblings) {
  auto verifier = MakeVerifier("rrs");
  ASSERT_NE(verifier, nullptr);
  ExpectLossless(*verifier, Catalogue(DraftMode::kIndependent, false), "rrs (iid)");
}

TEST(RrsVerifierTest, EqualsSpecInferWhenSiblingsShareARow) {
  auto rrs = MakeVerifier("rrs");
  auto specinfer = MakeVerifier("specinfer");
  ASSERT_NE(rrs, nullptr);
  ASSERT_NE(specinfer, nullptr);
  for (const Instance& instance : Catalogue(DraftMode::kIndependent, false)) {
    auto a = enumeration::ExactLaw(*rrs, instance);
    auto b = enumeration::ExactLaw(*specinfer, instance);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size()) << instance.Describe();
    for (const auto& [tokens, probability] : *a) EXPECT_NEAR(probability, (*b)[tokens], kLosslessTolerance);
  }
}

TEST(RrsVerifierTest, MatchesTheComputedFigure2Setting) {
  auto verifier = MakeVerifier("rrs");
  ASSERT_NE(verifier, nullptr);
  for (const Figure2Row& row : Figure2Table())
    EXPECT_NEAR(ExpectedAccepted(*verifier, Figure2Instance(row.q2)), row.specinfer, kTableRounding) << "q2=" << row.q2;
}

TEST(RrsVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("rrs");
  ASSERT_NE(verifier, nullptr);
  for (std::vector<int> shape : {std::vector<int>{1, 1, 1}, {2, 1}, {1, 2}, {2, 2}, {3}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kIndependent, 23);
    instance.target.one_hot = instance.draft.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
  }
}

TEST(RrsVerifierTest, RefusesPerChildRowsAndOtherModes) {
  auto verifier = MakeVerifier("rrs");
  ASSERT_NE(verifier, nullptr);
  for (DraftMode mode : {DraftMode::kPerChildIndependent, DraftMode::kWithoutReplacement, DraftMode::kTopK})
    EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({2}, 4, mode, 1)).code(), absl::StatusCode::kInvalidArgument)
        << enumeration::DraftModeName(mode);
}

TEST(RrsVerifierTest, NegativeControlUnmaskedQOnWithoutReplacementDraftsIsLossy) {
  // §0.4's negative control: without-replacement siblings verified with the unmasked q.
  auto verifier = MakeVerifier("rrs");
  ASSERT_NE(verifier, nullptr);
  std::vector<Instance> instances;
  for (Instance instance : Catalogue(DraftMode::kWithoutReplacement, false)) {
    instance.declared_sampling = DraftSampling::kIndependent;
    instances.push_back(instance);
  }
  const double error = MaxLawError(*verifier, instances);
  std::printf("[ negative ] rrs, unmasked q on w/o-replacement drafts: max |error| %.3g\n", error);
  EXPECT_GT(error, kLossyThreshold);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
