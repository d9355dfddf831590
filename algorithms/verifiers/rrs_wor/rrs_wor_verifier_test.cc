#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(RrsWorVerifierTest, TraitsAreHonest) {
  auto verifier = MakeVerifier("rrs_wor");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  EXPECT_FALSE(verifier->traits().chain_only);
}

TEST(RrsWorVerifierTest, LosslessForSiblingsDrawnWithoutReplacement) {
  auto verifier = MakeVerifier("rrs_wor");
  ASSERT_NE(verifier, nullptr);
  ExpectLossless(*verifier, Catalogue(DraftMode::kWithoutReplacement, false), "rrs_wor (w/o replacement)");
}

TEST(RrsWorVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("rrs_wor");
  ASSERT_NE(verifier, nullptr);
  Instance chain = MakeInstance({1, 1, 1}, 4, DraftMode::kWithoutReplacement, 29);
  chain.target.one_hot = chain.draft.one_hot = true;
  EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, chain), 0);
  // Siblings without replacement need a non-degenerate q; the target stays greedy.
  for (std::vector<int> shape : {std::vector<int>{2, 1}, {1, 2}, {2, 2}, {3}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kWithoutReplacement, 29);
    instance.target.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
  }
}

TEST(RrsWorVerifierTest, RefusesIndependentAndTokenOnlyDrafts) {
  auto verifier = MakeVerifier("rrs_wor");
  ASSERT_NE(verifier, nullptr);
  for (DraftMode mode : {DraftMode::kIndependent, DraftMode::kPerChildIndependent, DraftMode::kTopK})
    EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({2}, 4, mode, 1)).code(), absl::StatusCode::kInvalidArgument)
        << enumeration::DraftModeName(mode);
}

TEST(RrsWorVerifierTest, NegativeControlIidDraftsDeclaredWithoutReplacementAreLossy) {
  auto verifier = MakeVerifier("rrs_wor");
  ASSERT_NE(verifier, nullptr);
  std::vector<Instance> instances;
  for (Instance instance : Catalogue(DraftMode::kIndependent, false)) {
    instance.declared_sampling = DraftSampling::kWithoutReplacement;
    instances.push_back(instance);
  }
  const double error = MaxLawError(*verifier, instances);
  std::printf("[ negative ] rrs_wor fed i.i.d. drafts: max |error| %.3g\n", error);
  EXPECT_GT(error, kLossyThreshold);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
