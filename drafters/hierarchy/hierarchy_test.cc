// Hierarchy Drafting: its levels asked from the most local down (this
// generation, earlier generations, the corpus), the more local level's drafts
// first when several answer; decoding with it: greedy's tokens at T = 0 with
// chains and trees, the earlier generations' level carried across prompts,
// the target's law at T = 1 with branching trees; option errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "drafters/retrieval/datastore.h"
#include "framework/speculative_decoder.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/device_roots.h"
#include "tests/support/pipelined_agreement.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Tokens = std::vector<int32_t>;
using Paths = std::vector<Tokens>;

// A datastore of `tokens` (vocabulary 8) in a temporary file.
std::string CorpusFile(const Tokens& tokens) {
  auto store = retrieval::Datastore::Build(tokens, 8);
  EXPECT_TRUE(store.ok()) << store.status();
  const std::string path = ::testing::TempDir() + "/hierarchy_" + std::to_string(::getpid()) + ".splds";
  EXPECT_TRUE(retrieval::WriteDatastore(*store, path).ok());
  return path;
}

TEST(HierarchyDrafterTest, AsksTheMostLocalLevelFirst) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  const std::string corpus = CorpusFile({5, 7, 3, 5, 7, 3, 1});
  auto method = testing::MethodFromYaml(
      absl::StrCat("{name: h, drafter: {type: hierarchy, min_token_prob: 0, datastore: ", corpus,
                   "}, tree_builder: {type: trie, budget: 8, max_candidates: 8}, verifier: {type: greedy}}"),
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  Drafter& drafter = *method->drafter;
  auto start = [&](const Tokens& prompt, const Tokens& generated = {}) {
    ASSERT_TRUE(drafter.Reset(prompt, {}).ok());
    Tokens context = prompt;
    context.insert(context.end(), generated.begin(), generated.end());
    ASSERT_TRUE(drafter.BeginStep(context).ok());
  };
  auto chain = [&](int tokens) { return *drafter.Continuation(TokenTree(0), 0, tokens); };
  auto tree = [&](int candidates) { return *drafter.Continuations(TokenTree(0), 0, 3, candidates); };

  // This generation: "1 2" was followed by "3 1 2".
  start({1, 2, 3, 1, 2});
  EXPECT_THAT(chain(3), ElementsAre(3, 1, 2));
  // A generation whose output is "6 4 4", then a prompt ending in "6": its
  // own tokens continue nothing; the earlier output does.
  start({1, 2}, {6, 4, 4});
  start({0, 6});
  EXPECT_THAT(chain(3), ElementsAre(4, 4));
  // Neither level knows "5 7"; the corpus continues it with "3".
  start({0, 5, 7});
  const Tokens from_corpus = chain(3);
  ASSERT_FALSE(from_corpus.empty());
  EXPECT_EQ(from_corpus.front(), 3);
  // Both this generation ("5 7" then "1") and the corpus ("3") answer: one
  // draft asked, the local one; more, the local ones first.
  start({5, 7, 1, 0, 5, 7});
  EXPECT_THAT(tree(1), ElementsAre(Tokens{1}));
  const Paths all = tree(8);
  ASSERT_GE(all.size(), 4u);
  EXPECT_EQ(all[0], Tokens({1}));
  const auto corpus_path = std::find(all.begin(), all.end(), Tokens{3});
  ASSERT_NE(corpus_path, all.end());
  for (auto it = all.begin(); it != corpus_path; ++it) EXPECT_EQ(it->front(), 1) << "a local path after the corpus'";
}

const Tokens kPrompt = {1, 5, 3, 7, 2, 5, 3};

TEST(HierarchyDrafterTest, EqualsGreedyAndLearnsFromEarlierGenerations) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  const std::string corpus = CorpusFile({5, 3, 7, 2, 1, 4, 6, 5, 3, 7, 0});
  for (const char* builder : {"{type: chain}", "{type: trie, budget: 12, max_candidates: 12}"}) {
    for (const char* verifier : {"{type: greedy}", "{type: point_mass}"}) {
      for (bool pipeline : {false, true}) {
        auto method = testing::MethodFromYaml(
            absl::StrCat("{name: h, drafter: {type: hierarchy, datastore: ", corpus, "}, tree_builder: ", builder,
                         ", verifier: ", verifier, ", length_policy: {type: fixed, gamma: 6}}"),
            target.get());
        ASSERT_TRUE(method.ok()) << method.status();
        const std::string where = absl::StrCat(builder, " ", verifier, pipeline ? " pipelined" : " step by step");
        // The same prompt again: the first output is an earlier generation.
        const std::array<int, 2> accepted = testing::AcceptedInTwoRuns(*target, *method, kPrompt, 30, pipeline, where);
        EXPECT_GT(accepted[1], accepted[0]) << where << ": the second run drafts the first's output";
      }
    }
  }
}

// The device form (levels 1 and 2 speculated on the device, the corpus's
// lookup there, the tree's levels merged there) drafts what the host's
// levels draft, pipelined step after step and prompt after prompt.
TEST(HierarchyDrafterTest, PipelinedDraftsAreTheHostLevelsDrafts) {
  const c10::Device device = testing::TestDevice();
  std::mt19937 rng(29);
  Tokens corpus_tokens(400);
  for (auto& t : corpus_tokens) t = static_cast<int32_t>(rng() % 4);
  const std::string corpus = CorpusFile(corpus_tokens);
  int compared = 0;
  for (int vocab : {3, 8}) {
    for (int length : {2, 60}) {
      std::vector<Tokens> prompts(3, Tokens(length));
      for (Tokens& prompt : prompts)
        for (auto& t : prompt) t = static_cast<int32_t>(rng() % vocab);
      for (const std::string options :
           {absl::StrCat(", datastore: ", corpus), std::string(", min_token_prob: 0, max_depth: 4"),
            absl::StrCat(", min_token_prob: 0.3, datastore: ", corpus, ", max_suffix: 3, min_suffix: 1")}) {
        for (auto [max_tokens, max_candidates] : {std::pair{6, 16}, std::pair{1, 1}, std::pair{10, 40}})
          compared += testing::ExpectPipelinedDraftsOfTheHost(device, absl::StrCat("{type: hierarchy", options, "}"),
                                                              prompts, 9, max_tokens, max_candidates, vocab);
      }
    }
  }
  EXPECT_GT(compared, 1500);
}

TEST(HierarchyDrafterTest, TrieMatchesTargetLawAtTemperatureOne) {
  constexpr int kRuns = 2000;
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const Tokens prompt = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};  // "2 3" followed by "5 4" and "6 1": a branching tree
  auto method = testing::MethodFromYaml(
      "{name: h, drafter: {type: hierarchy, min_token_prob: 0}, tree_builder: {type: trie, budget: 8, "
      "max_candidates: 8}, verifier: {type: point_mass}, length_policy: {type: fixed, gamma: 3}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const testing::TwoTokenSample sample = testing::SampleTwoTokens(*target, *method, prompt, 200, 1000, false);
  EXPECT_GT(sample.branching, 50) << "the trees branched";
  testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, prompt, testing::ExactTwoTokenLaw(*target, prompt, 1.0),
                                              kRuns, "hierarchy trie");
}

TEST(HierarchyDrafterTest, OptionErrorsNameTheKey) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  auto create = [&](const std::string& drafter) {
    return std::string(
        testing::MethodFromYaml(absl::StrCat("{name: h, drafter: ", drafter, ", verifier: {type: greedy}}"),
                                target.get())
            .status()
            .message());
  };
  EXPECT_THAT(create("{type: hierarchy, max_depth: 0}"), HasSubstr("key 'drafter.max_depth'"));
  EXPECT_THAT(create("{type: hierarchy, min_token_prob: 2}"), HasSubstr("key 'drafter.min_token_prob'"));
  EXPECT_THAT(create("{type: hierarchy, min_suffix: 20}"), HasSubstr("key 'drafter.min_suffix'"));
  EXPECT_THAT(create("{type: hierarchy, datastore: /nonexistent/x.splds}"), HasSubstr("key 'drafter.datastore'"));
  EXPECT_THAT(create("{type: hierarchy, levels: 3}"), HasSubstr("unknown key 'drafter.levels'"));
}

}  // namespace
}  // namespace speclab
