#include <gtest/gtest.h>

#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(PointMassVerifierTest, TraitsAreHonest) {
  auto verifier = MakeVerifier("point_mass");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_FALSE(verifier->traits().needs_draft_distributions);
  EXPECT_FALSE(verifier->traits().chain_only);
}

TEST(PointMassVerifierTest, LosslessForTokenOnlyAndSampledDrafts) {
  auto verifier = MakeVerifier("point_mass");
  ASSERT_NE(verifier, nullptr);
  // Lossless for any drafter independent of the verifier (§1.4): deterministic
  // top-k trees, i.i.d. trees with duplicates, and without-replacement trees.
  std::vector<Instance> instances = Catalogue(DraftMode::kTopK, false);
  for (DraftMode mode : {DraftMode::kIndependent, DraftMode::kWithoutReplacement})
    for (const Instance& instance : Catalogue(mode, false)) instances.push_back(instance);
  ExpectLossless(*verifier, instances, "point_mass (top-k, iid, w/o repl.)");
}

TEST(PointMassVerifierTest, AcceptanceOfADeterministicDraftIsItsTargetMass) {
  auto verifier = MakeVerifier("point_mass");
  ASSERT_NE(verifier, nullptr);
  const Instance instance = MakeInstance({3}, 5, DraftMode::kTopK, 8);
  enumeration::InstanceModels models(instance);
  double covered = 0;
  ASSERT_TRUE(enumeration::ForEachDraft(instance, models, [&](const enumeration::DraftedTree& drafted, double) {
                for (int child : drafted.tree.children(0)) covered += models.target.Row({0})[drafted.tree.token(child)];
                return absl::OkStatus();
              }).ok());
  EXPECT_NEAR(ExpectedAccepted(*verifier, instance), covered,
              kLosslessTolerance);  // §5.1: Σ_j p(c_j)
}

TEST(PointMassVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("point_mass");
  ASSERT_NE(verifier, nullptr);
  for (std::vector<int> shape : {std::vector<int>{1, 1, 1}, {2, 1}, {3}, {2, 2}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kTopK, 17);
    instance.target.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
  }
}

TEST(PointMassVerifierTest, RejectsDuplicateSiblingsWithProbabilityOne) {
  TokenTree tree(0);
  tree.AddNode(0, 1);
  const int duplicate = tree.AddNode(0, 1);
  VerificationProblem problem;
  problem.tree = &tree;
  problem.target = ProbabilityRows(3, 2);
  for (int node = 0; node < 3; ++node) {
    problem.target.mutable_row(node)[0] = 0.5;
    problem.target.mutable_row(node)[1] = 0.5;
  }
  problem.target_argmax = {0, 0, 0};
  auto verifier = MakeVerifier("point_mass");
  ASSERT_NE(verifier, nullptr);
  auto law = enumeration::VerdictLaw(*verifier, problem);
  ASSERT_TRUE(law.ok()) << law.status();
  for (const auto& [verdict, probability] : *law)
    EXPECT_FALSE(!verdict.accepted.empty() && verdict.accepted[0] == duplicate) << probability;
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
