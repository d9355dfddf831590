// The example plugins' tests: the drafter's proposals, and the verifier's
// exact output law through speclab's enumeration harness (installed with the
// SDK: algorithms/verifiers/testing/law_check.h).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "algorithms/verifiers/testing/law_check.h"
#include "framework/core/options.h"
#include "framework/core/verifier_registry.h"
#include "framework/drafter.h"

namespace {

using speclab::enumeration::DraftMode;
using speclab::enumeration::Instance;

std::unique_ptr<speclab::Verifier> MakeVerifier(const char* name) {
  auto spec = speclab::Options::FromString(std::string("{type: ") + name + "}", "test.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto verifier = speclab::VerifierRegistry::Create(*spec, "verifier");
  EXPECT_TRUE(verifier.ok()) << verifier.status();
  return verifier.ok() ? *std::move(verifier) : nullptr;
}

Instance Chain(int depth, DraftMode mode, uint64_t seed) {
  Instance instance;
  instance.target = {.vocab = 4, .seed = seed};
  instance.draft = {.vocab = 4, .seed = seed + 100};
  instance.branching = std::vector<int>(depth, 1);
  instance.mode = mode;
  return instance;
}

TEST(LastFollowerDrafterTest, ProposesTheLastFollowerOfEachToken) {
  auto spec = speclab::Options::FromString("{type: last_follower}", "test.yaml");
  ASSERT_TRUE(spec.ok());
  auto drafter = speclab::DrafterRegistry::Create(*spec, "drafter", speclab::DrafterEnvironment{});
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  EXPECT_EQ((*drafter)->kind(), speclab::DrafterKind::kTokensOnly);
  const std::vector<int32_t> context = {1, 2, 3, 1, 4, 2};  // 1 -> 4 (the last), 2 -> 3, 3 -> 1, 4 -> 2
  ASSERT_TRUE((*drafter)->Reset(context, {}).ok());
  ASSERT_TRUE((*drafter)->BeginStep(context).ok());
  const speclab::TokenTree tree(2);
  auto drafts = (*drafter)->Continuation(tree, 0, 5);
  ASSERT_TRUE(drafts.ok()) << drafts.status();
  EXPECT_EQ(*drafts, (std::vector<int32_t>{3, 1, 4, 2, 3}));
  // A token never followed by anything ends the proposal.
  ASSERT_TRUE((*drafter)->Reset({7}, {}).ok());
  ASSERT_TRUE((*drafter)->BeginStep(std::vector<int32_t>{7}).ok());
  EXPECT_TRUE((*drafter)->Continuation(speclab::TokenTree(7), 0, 5)->empty());
}

// The exact law of one step followed by plain target sampling equals the
// target's, on chains of depth 1 to 3 drafted either way.
TEST(TextbookRejectionVerifierTest, IsLosslessByExactEnumeration) {
  auto verifier = MakeVerifier("textbook_rejection");
  ASSERT_NE(verifier, nullptr);
  for (DraftMode mode : {DraftMode::kIndependent, DraftMode::kWithoutReplacement}) {
    for (int depth : {1, 2, 3}) {
      const Instance instance = Chain(depth, mode, 7 + depth);
      auto comparison = speclab::enumeration::CheckExactly(*verifier, instance);
      ASSERT_TRUE(comparison.ok()) << comparison.status();
      EXPECT_LT(comparison->max_abs_error, speclab::enumeration::LosslessTolerance()) << instance.Describe();
      EXPECT_GT(comparison->expected_accepted, 0.0) << instance.Describe();
    }
  }
}

// The same law as the built-in `rejection`, outcome by outcome.
TEST(TextbookRejectionVerifierTest, HasTheBuiltInRulesLaw) {
  auto textbook = MakeVerifier("textbook_rejection");
  auto builtin = MakeVerifier("rejection");
  ASSERT_TRUE(textbook != nullptr && builtin != nullptr);
  const Instance instance = Chain(2, DraftMode::kIndependent, 3);
  auto a = speclab::enumeration::ExactLaw(*textbook, instance);
  auto b = speclab::enumeration::ExactLaw(*builtin, instance);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (const auto& [tokens, probability] : *a)
    EXPECT_NEAR(probability, (*b)[tokens], speclab::enumeration::LosslessTolerance());
}

TEST(TextbookRejectionVerifierTest, RefusesTreesAndTokenOnlyDrafts) {
  auto verifier = MakeVerifier("textbook_rejection");
  ASSERT_NE(verifier, nullptr);
  EXPECT_TRUE(verifier->traits().chain_only);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  speclab::TokenTree tree(0);
  tree.AddNode(0, 1);
  speclab::VerificationProblem problem;
  problem.tree = &tree;
  problem.target = speclab::ProbabilityRows(2, 4);
  speclab::SeededRandomSource random(1);
  EXPECT_FALSE(verifier->Verify(problem, random).ok());
}

}  // namespace
