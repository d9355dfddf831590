// The merge drafter: candidates of several token-only drafters in one tree,
// in priority and interleaved order; greedy's tokens at T = 0 and the
// target's law at T = 1; refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;
using Tokens = std::vector<int32_t>;

absl::StatusOr<std::unique_ptr<Drafter>> MergeFromYaml(const std::string& yaml) {
  Options spec = *Options::FromString(yaml, "m.yaml");
  return DrafterRegistry::Create(spec, "drafter", DrafterEnvironment{});
}

// prompt_lookup's matches of "2 3" are 5 4 and 6 1; suffix_tree's best after
// "2 3" is its own tree of both. Priority lists the first drafter's first.
TEST(MergeDrafterTest, MergesCandidatesInPriorityOrInterleavedOrder) {
  const Tokens context = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};
  for (const char* order : {"priority", "interleave"}) {
    auto drafter = MergeFromYaml(absl::StrCat(
        "{type: merge, order: ", order, ", drafters: [{type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 2}, ",
        "{type: prompt_lookup, max_ngram_size: 1, num_pred_tokens: 3}]}"));
    ASSERT_TRUE(drafter.ok()) << drafter.status();
    EXPECT_EQ((*drafter)->kind(), DrafterKind::kTokensOnly);
    ASSERT_TRUE((*drafter)->Reset(context, {}).ok());
    ASSERT_TRUE((*drafter)->BeginStep(context).ok());
    auto merged = (*drafter)->Continuations(TokenTree(3), 0, 10, 10);
    ASSERT_TRUE(merged.ok()) << merged.status();
    // First drafter: {5, 4}, {6, 1}; second: {5, 4, 2}, {6, 1, 2}.
    const std::vector<Tokens> expected =
        std::string(order) == "priority" ? std::vector<Tokens>{{5, 4}, {6, 1}, {5, 4, 2}, {6, 1, 2}}
                                         : std::vector<Tokens>{{5, 4}, {5, 4, 2}, {6, 1}, {6, 1, 2}};
    EXPECT_EQ(*merged, expected) << order;
    auto capped = (*drafter)->Continuations(TokenTree(3), 0, 10, 3);
    EXPECT_EQ(capped->size(), 3u);
    auto chain = (*drafter)->Continuation(TokenTree(3), 0, 10);
    EXPECT_EQ(*chain, (Tokens{5, 4})) << "the first drafter that proposes";
  }
}

TEST(MergeDrafterTest, EqualsGreedyAndMatchesTargetLawInOneTree) {
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const std::string spec =
      "{name: merged, drafter: {type: merge, order: interleave, drafters: [{type: prompt_lookup, max_ngram_size: 2, "
      "num_pred_tokens: 3}, {type: suffix_tree, max_spec_factor: 4, min_token_prob: 0.05}]}, tree_builder: {type: "
      "trie, budget: 8, max_candidates: 8}, verifier: {type: point_mass}, length_policy: {type: fixed, gamma: 3}}";
  auto method = testing::MethodFromYaml(spec, target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const Tokens prompt = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};
  auto greedy = GenerateAutoregressive(*target, prompt, {.sampling = {.temperature = 0}, .max_new_tokens = 20});
  ASSERT_TRUE(greedy.ok());
  auto at_zero = GenerateSpeculative(*target, *method, prompt, {.sampling = {.temperature = 0}, .max_new_tokens = 20});
  ASSERT_TRUE(at_zero.ok()) << at_zero.status();
  EXPECT_EQ(at_zero->tokens, greedy->tokens);

  constexpr int kRuns = 2000;
  const auto law = testing::ExactTwoTokenLaw(*target, prompt, 1.0);
  testing::TwoTokenCounts counts;
  int accepted = 0, branching = 0;
  for (int i = 0; i < kRuns; ++i) {
    auto out = GenerateSpeculative(*target, *method, prompt, {.sampling = {.temperature = 1}, .max_new_tokens = 2,
                                                               .seed = static_cast<uint64_t>(1000 + i)});
    ASSERT_TRUE(out.ok()) << out.status();
    ++counts[{out->tokens[0], out->tokens[1]}];
    for (const StepStats& step : out->steps) {
      accepted += step.accepted;
      branching += step.tree_nodes > step.longest_path;
    }
  }
  const testing::ChiSquareResult result = testing::ChiSquareTest(counts, law, kRuns);
  EXPECT_LT(result.statistic, result.critical) << "dof " << result.degrees_of_freedom;
  EXPECT_GT(accepted, kRuns / 20);
  EXPECT_GT(branching, kRuns / 2) << "the trees branched";
}

TEST(MergeDrafterTest, RefusesMixedKindsAndBadOptions) {
  EXPECT_THAT(std::string(MergeFromYaml("{type: merge, drafters: []}").status().message()),
              HasSubstr("key 'drafters': expected at least one drafter"));
  EXPECT_THAT(std::string(MergeFromYaml("{type: merge, order: random, drafters: [{type: prompt_lookup}]}")
                              .status()
                              .message()),
              HasSubstr("key 'order': expected priority or interleave"));
  EXPECT_THAT(std::string(MergeFromYaml("{type: merge, drafters: [{type: nope}]}").status().message()),
              HasSubstr("unknown drafter 'nope'"));
  EXPECT_THAT(std::string(MergeFromYaml("{type: merge, drafters: [{type: prompt_lookup, ngram: 2}]}")
                              .status()
                              .message()),
              HasSubstr("unknown key"));
  auto target = testing::TinyModel(1);
  auto logits = testing::MethodFromYaml(
      "{name: m, drafter: {type: merge, drafters: [{type: prompt_lookup}, {type: layer_skip, exit_layer: 1}]}, "
      "verifier: {type: greedy}}",
      target.get());
  EXPECT_THAT(std::string(logits.status().message()),
              HasSubstr("key 'drafter.drafters[1].type': merge takes drafters of one kind: the first gives tokens "
                        "only, this one next-token logits"));
}

}  // namespace
}  // namespace speclab
