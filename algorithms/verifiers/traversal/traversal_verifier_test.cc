#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

void ExpectSameLaw(const Verifier& a, const Verifier& b, const Instance& instance) {
  auto law_a = enumeration::ExactLaw(a, instance);
  auto law_b = enumeration::ExactLaw(b, instance);
  ASSERT_TRUE(law_a.ok()) << law_a.status();
  ASSERT_TRUE(law_b.ok()) << law_b.status();
  for (const auto& [tokens, probability] : *law_a)
    EXPECT_NEAR(probability, (*law_b)[tokens], kLosslessTolerance) << instance.Describe();
  for (const auto& [tokens, probability] : *law_b)
    EXPECT_NEAR(probability, (*law_a)[tokens], kLosslessTolerance) << instance.Describe();
}

TEST(TraversalVerifierTest, TraitsAreHonest) {
  auto verifier = MakeVerifier("traversal");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  EXPECT_FALSE(verifier->traits().chain_only);
}

TEST(TraversalVerifierTest, LosslessWithAndWithoutReplacement) {
  auto verifier = MakeVerifier("traversal");
  ASSERT_NE(verifier, nullptr);
  ExpectLossless(*verifier, Catalogue(DraftMode::kIndependent, false), "traversal (iid)");
  ExpectLossless(*verifier, Catalogue(DraftMode::kWithoutReplacement, false), "traversal (w/o replacement)");
}

TEST(TraversalVerifierTest, ReducesToBlockOnChainsAndToRrsAtDepthOne) {
  auto traversal = MakeVerifier("traversal");
  auto block = MakeVerifier("block");
  auto rrs = MakeVerifier("rrs");
  auto rrs_wor = MakeVerifier("rrs_wor");
  ASSERT_TRUE(traversal && block && rrs && rrs_wor);
  for (const Instance& instance : Catalogue(DraftMode::kIndependent, true)) ExpectSameLaw(*traversal, *block, instance);
  for (uint64_t seed : {5u, 6u}) {
    ExpectSameLaw(*traversal, *rrs, MakeInstance({3}, 4, DraftMode::kIndependent, seed));
    ExpectSameLaw(*traversal, *rrs_wor, MakeInstance({3}, 4, DraftMode::kWithoutReplacement, seed));
  }
}

TEST(TraversalVerifierTest, AcceptsAtLeastAsMuchAsRecursiveRejectionOnTrees) {
  // §1.10 reports this on every case tried; it is an observation, not a theorem.
  auto traversal = MakeVerifier("traversal");
  auto rrs = MakeVerifier("rrs");
  auto rrs_wor = MakeVerifier("rrs_wor");
  ASSERT_TRUE(traversal && rrs && rrs_wor);
  for (uint64_t seed : {11u, 23u, 37u}) {
    for (std::vector<int> shape : {std::vector<int>{2, 1}, {1, 2}, {2, 2}}) {
      const Instance iid = MakeInstance(shape, shape == std::vector<int>{2, 2} ? 3 : 4, DraftMode::kIndependent, seed);
      Instance wor = iid;
      wor.mode = DraftMode::kWithoutReplacement;
      EXPECT_GE(ExpectedAccepted(*traversal, iid), ExpectedAccepted(*rrs, iid) - kLosslessTolerance) << iid.Describe();
      EXPECT_GE(ExpectedAccepted(*traversal, wor), ExpectedAccepted(*rrs_wor, wor) - kLosslessTolerance)
          << wor.Describe();
    }
  }
}

TEST(TraversalVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("traversal");
  ASSERT_NE(verifier, nullptr);
  for (std::vector<int> shape : {std::vector<int>{1, 1, 1}, {2, 1}, {1, 2}, {2, 2}, {3}}) {
    Instance iid = MakeInstance(shape, 4, DraftMode::kIndependent, 43);
    iid.target.one_hot = iid.draft.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, iid), 0);
    Instance wor = MakeInstance(shape, 4, DraftMode::kWithoutReplacement, 43);
    wor.target.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, wor), 0);
  }
}

TEST(TraversalVerifierTest, RefusesPerChildRowsAndTokenOnlyDrafts) {
  auto verifier = MakeVerifier("traversal");
  ASSERT_NE(verifier, nullptr);
  for (DraftMode mode : {DraftMode::kPerChildIndependent, DraftMode::kTopK})
    EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({2}, 4, mode, 1)).code(), absl::StatusCode::kInvalidArgument)
        << enumeration::DraftModeName(mode);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
