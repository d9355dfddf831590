#include <gtest/gtest.h>

#include "framework/core/verifier_registry.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(TypicalVerifierTest, TraitsDeclareItLossy) {
  auto verifier = MakeVerifier("typical");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossy);
  EXPECT_FALSE(verifier->traits().needs_draft_distributions);
  EXPECT_TRUE(verifier->traits().needs_target_rows);
  EXPECT_EQ(VerifierRegistry::Find("typical")->lossless, "lossy");
}

TEST(TypicalVerifierTest, ValidatesItsOptions) {
  EXPECT_TRUE(CreateStatus("typical", "{posterior_threshold: 0.09, posterior_alpha: 0.3}").ok());
  EXPECT_FALSE(CreateStatus("typical", "{posterior_threshold: 0}").ok());
  EXPECT_FALSE(CreateStatus("typical", "{posterior_threshold: 1.5}").ok());
  EXPECT_FALSE(CreateStatus("typical", "{posterior_alpha: -1}").ok());
  EXPECT_FALSE(CreateStatus("typical", "{posterior_alpha: high}").ok());
  EXPECT_FALSE(CreateStatus("typical", "{threshold: 0.1}").ok());
}

// root -> {a, b}; a -> c. Rows are the same everywhere: (0.6, 0.3, 0.1).
struct SmallTree {
  SmallTree() : tree(0) {
    a = tree.AddNode(0, 0);
    b = tree.AddNode(0, 1);
    c = tree.AddNode(a, 2);
    problem.tree = &tree;
    problem.target = ProbabilityRows(4, 3);
    for (int node = 0; node < 4; ++node) {
      auto row = problem.target.mutable_row(node);
      row[0] = 0.6, row[1] = 0.3, row[2] = 0.1;
    }
    problem.target_argmax = {0, 0, 0, 0};
  }
  TokenTree tree;
  int a, b, c;
  VerificationProblem problem;
};

TEST(TypicalVerifierTest, AppliesMedusasEntropyThreshold) {
  // H = 0.898 nats, so δ·exp(-H) = 0.3·0.407 = 0.122 and thr = min(ε, 0.122).
  SmallTree small;
  SeededRandomSource random(1);
  auto lenient = MakeVerifier("typical", "{posterior_threshold: 0.09, posterior_alpha: 0.3}");
  ASSERT_NE(lenient, nullptr);
  auto verdict = lenient->Verify(small.problem, random);
  ASSERT_TRUE(verdict.ok()) << verdict.status();
  EXPECT_EQ(verdict->accepted, (std::vector<int>{small.a, small.c}));  // p(c) = 0.1 > 0.09
  EXPECT_EQ(verdict->extra_token, 0);
  auto strict = MakeVerifier("typical", "{posterior_threshold: 0.2, posterior_alpha: 0.3}");
  ASSERT_NE(strict, nullptr);
  verdict = strict->Verify(small.problem, random);
  ASSERT_TRUE(verdict.ok());
  EXPECT_EQ(verdict->accepted, (std::vector<int>{small.a}));  // thr = 0.122 rejects c
}

TEST(TypicalVerifierTest, BreaksLengthTiesByLikelihood) {
  SmallTree small;
  // Make b likelier than a: both pass at depth 1, and c no longer passes.
  for (int node = 0; node < 4; ++node) {
    auto row = small.problem.target.mutable_row(node);
    row[0] = 0.3, row[1] = 0.65, row[2] = 0.05;
  }
  SeededRandomSource random(1);
  auto verifier = MakeVerifier("typical");
  ASSERT_NE(verifier, nullptr);
  auto verdict = verifier->Verify(small.problem, random);
  ASSERT_TRUE(verdict.ok());
  EXPECT_EQ(verdict->accepted, (std::vector<int>{small.b}));
}

TEST(TypicalVerifierTest, IsGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("typical");
  ASSERT_NE(verifier, nullptr);
  for (std::vector<int> shape : {std::vector<int>{1, 1, 1}, {2, 1}, {2, 2}, {3}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kTopK, 47);
    instance.target.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
  }
}

TEST(TypicalVerifierTest, IsDetectedAsLossyAboveTemperatureZero) {
  auto verifier = MakeVerifier("typical");
  ASSERT_NE(verifier, nullptr);
  const double error = MaxLawError(*verifier, Catalogue(DraftMode::kTopK, false));
  std::printf("[ lossy ] typical (top-k trees): max |error| %.3g\n", error);
  EXPECT_GT(error, kLossyThreshold);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
