// Cacheback's LRU table (rows and followers in least-recently-used order,
// eviction, text fed in pieces), its drafts (a chain carried on by further
// lookups, a tree of every cached follower) and decoding with the
// ngram_cache drafter: greedy's tokens at T = 0, the cache carried across
// prompts, the target's law at T = 1 with branching trees.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "drafters/common/lru_ngram_table.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab::ngram_cache {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Tokens = std::vector<int32_t>;

TEST(LruNgramTableTest, KeepsTheMostRecentFollowersOfTheMostRecentLeaders) {
  LruNgramTable table({.leader_length = 1, .follower_length = 2, .rows = 3, .columns = 2});
  table.Learn({1, 2, 3, 1, 4, 5, 1, 2, 3});
  // Windows: 1|2 3, 2|3 1, 3|1 4, 1|4 5, 4|5 1, 5|1 2, 1|2 3: rows by recency 1, 5, 4 (2 and 3 evicted).
  EXPECT_THAT(table.Keys(), ElementsAre(Tokens{1}, Tokens{5}, Tokens{4}));
  EXPECT_THAT(table.Followers({1}), ElementsAre(Tokens{2, 3}, Tokens{4, 5}));  // 2 3 seen again: to the front
  EXPECT_TRUE(table.Followers({2}).empty());
  table.Learn({1, 6, 7});  // continues the text: 2|3 1, 3|1 6, 1|6 7
  EXPECT_THAT(table.Followers({1}), ElementsAre(Tokens{6, 7}, Tokens{2, 3}));  // two columns: 4 5 evicted
  EXPECT_THAT(table.Keys(), ElementsAre(Tokens{1}, Tokens{3}, Tokens{2}));
}

TEST(LruNgramTableTest, TextInPiecesTeachesWhatItTeachesAtOnce) {
  const Tokens text = {4, 1, 2, 4, 1, 3, 4, 1, 2, 2, 4, 1};
  LruNgramTable whole({.leader_length = 2, .follower_length = 2, .rows = 8, .columns = 3});
  whole.Learn(text);
  LruNgramTable pieces(whole.shape());
  for (size_t at = 0; at < text.size(); at += 5)
    pieces.Learn(absl::MakeConstSpan(text).subspan(at, std::min<size_t>(5, text.size() - at)));
  EXPECT_EQ(pieces.Keys(), whole.Keys());
  for (const Tokens& key : whole.Keys()) EXPECT_EQ(pieces.Followers(key), whole.Followers(key));
  pieces.EndText();
  pieces.Learn({9, 9});  // a new text: no window spans the two
  EXPECT_TRUE(pieces.Followers({1, 9}).empty());
}

const Tokens kPrompt = {1, 5, 3, 7, 2, 5, 3};

TEST(NgramCacheDrafterTest, EqualsGreedyAndCarriesItsCacheAcrossPrompts) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  auto greedy = GenerateAutoregressive(*target, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
  ASSERT_TRUE(greedy.ok());
  for (const char* builder : {"{type: chain}", "{type: trie, budget: 12, max_candidates: 12}"}) {
    for (const char* verifier : {"{type: greedy}", "{type: point_mass}"}) {
      auto method = testing::MethodFromYaml(
          absl::StrCat("{name: cache, drafter: {type: ngram_cache, leader: 2, follower: 3}, tree_builder: ", builder,
                       ", verifier: ", verifier, ", length_policy: {type: fixed, gamma: 6}}"),
          target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      int accepted[2] = {0, 0};
      for (int run = 0; run < 2; ++run) {  // the same prompt again: the first output is cached
        auto out = GenerateSpeculative(*target, *method, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ(out->tokens, greedy->tokens) << builder << " " << verifier << " run " << run;
        for (const StepStats& step : out->steps) accepted[run] += step.accepted;
        if (run == 0) EXPECT_THAT(out->engine_form, HasSubstr("step by step"));
      }
      EXPECT_GT(accepted[1], accepted[0]) << builder << ": the second run drafts the first's output";
      EXPECT_GE(accepted[1], 15) << builder;
    }
  }
}

TEST(NgramCacheDrafterTest, TrieMatchesTargetLawAtTemperatureOne) {
  constexpr int kRuns = 2000;
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const Tokens prompt = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};  // "3" followed by "5 4" and "6 1": a branching tree
  auto method = testing::MethodFromYaml(
      "{name: cache, drafter: {type: ngram_cache, leader: 1, follower: 2, transient: true}, "
      "tree_builder: {type: trie, budget: 8, max_candidates: 8}, verifier: {type: point_mass}, "
      "length_policy: {type: fixed, gamma: 3}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const testing::TwoTokenSample sample = testing::SampleTwoTokens(*target, *method, prompt, kRuns, 1000);
  const testing::ChiSquareResult result =
      testing::ChiSquareTest(sample.counts, testing::ExactTwoTokenLaw(*target, prompt, 1.0), kRuns);
  EXPECT_LT(result.statistic, result.critical) << "dof " << result.degrees_of_freedom;
  EXPECT_GT(sample.branching, kRuns / 2) << "the trees branched";
}

TEST(NgramCacheDrafterTest, OptionErrorsNameTheKey) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  auto create = [&](const std::string& drafter) {
    return std::string(
        testing::MethodFromYaml(absl::StrCat("{name: c, drafter: ", drafter, ", verifier: {type: greedy}}"),
                                target.get())
            .status()
            .message());
  };
  EXPECT_THAT(create("{type: ngram_cache, leader: 0}"), HasSubstr("key 'drafter.leader'"));
  EXPECT_THAT(create("{type: ngram_cache, follower: 65}"), HasSubstr("key 'drafter.follower'"));
  EXPECT_THAT(create("{type: ngram_cache, rows: 0}"), HasSubstr("key 'drafter.rows'"));
  EXPECT_THAT(create("{type: ngram_cache, columns: 0}"), HasSubstr("key 'drafter.columns'"));
  EXPECT_THAT(create("{type: ngram_cache, recursive: maybe}"), HasSubstr("key 'drafter.recursive'"));
  EXPECT_THAT(create("{type: ngram_cache, size: 3}"), HasSubstr("unknown key 'drafter.size'"));
}

}  // namespace
}  // namespace speclab::ngram_cache
