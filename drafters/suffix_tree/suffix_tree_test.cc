// SuffixDecoding's suffix trie against brute-force counts, its speculation on
// a worked example, and decoding with the suffix_tree drafter: greedy's tokens
// at T = 0, the global cache at work, the target's law at T = 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "drafters/suffix_tree/suffix_trie.h"
#include "framework/speculative_decoder.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/device_roots.h"
#include "tests/support/pipelined_agreement.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab::suffix_decoding {
namespace {

using ::testing::HasSubstr;
using Tokens = std::vector<int32_t>;

TEST(SuffixTrieTest, CountsEverySubstringUpToMaxDepthWithinEachSequence) {
  std::mt19937 rng(3);
  std::vector<Tokens> sequences;
  for (int n : {40, 25, 1, 30}) {
    Tokens s(n);
    for (auto& t : s) t = static_cast<int32_t>(rng() % 3);
    sequences.push_back(s);
  }
  constexpr int kDepth = 5;
  SuffixTrie trie(kDepth);
  for (const Tokens& s : sequences) {
    trie.Extend(absl::MakeSpan(s).subspan(0, s.size() / 2));  // in two calls: the same as one
    trie.Extend(absl::MakeSpan(s).subspan(s.size() / 2));
    trie.EndSequence();
  }
  auto brute = [&](const Tokens& q) {
    int64_t count = 0;
    for (const Tokens& s : sequences)
      for (size_t i = 0; i + q.size() <= s.size(); ++i) count += std::equal(q.begin(), q.end(), s.begin() + i);
    return count;
  };
  for (int length = 1; length <= kDepth + 1; ++length) {
    for (int code = 0; code < 243 && code < std::pow(3, length); ++code) {
      Tokens q;
      for (int i = 0, c = code; i < length; ++i, c /= 3) q.push_back(c % 3);
      EXPECT_EQ(trie.Count(q), length <= kDepth ? brute(q) : 0) << "length " << length << " code " << code;
    }
  }
}

// "1 2" occurs three times, followed by 3, 4 and 3: the tree after it is 3
// (2/3), 4 (1/3), then 3's continuations.
TEST(SuffixTrieTest, SpeculatesBestFirstByEmpiricalProbability) {
  SuffixTrie trie(8);
  trie.Extend({1, 2, 3, 5, 1, 2, 4, 6, 1, 2, 3, 7});
  SpeculationLimits limits{.max_tokens = 6, .max_path = 10, .max_spec_factor = 100, .min_token_prob = 0.2};
  const Draft draft = trie.Speculate({9, 1, 2}, limits);
  // m = 1 ("2": the same counts as "1 2") and m = 2 score alike; the longer match wins the tie.
  EXPECT_EQ(draft.match_length, 2);
  EXPECT_EQ(draft.tokens, (Tokens{3, 4, 5, 7, 6, 1}));
  EXPECT_EQ(draft.parents, (std::vector<int>{-1, -1, 0, 0, 1, 2}));
  EXPECT_DOUBLE_EQ(draft.probabilities[0], 2.0 / 3);
  EXPECT_DOUBLE_EQ(draft.probabilities[1], 1.0 / 3);
  EXPECT_DOUBLE_EQ(draft.probabilities[2], 1.0 / 3);  // "1 2 3 5": 1 of "1 2 3"'s 2
  EXPECT_DOUBLE_EQ(draft.score, 2.0 / 3 + 4 * (1.0 / 3) + 1.0 / 3);

  limits.max_spec_factor = 1.0;  // a match of m tokens drafts at most m
  EXPECT_EQ(trie.Speculate({9, 1, 2}, limits).tokens, (Tokens{3, 4}));
  limits.min_token_prob = 0.5;
  EXPECT_EQ(trie.Speculate({9, 1, 2}, limits).tokens, (Tokens{3}));
  limits = {.max_tokens = 3, .max_path = 3, .max_spec_factor = 100, .min_token_prob = 0.2, .tree = false};
  EXPECT_EQ(trie.Speculate({9, 1, 2}, limits).tokens, (Tokens{3, 5, 1})) << "the path of most frequent children";
  EXPECT_TRUE(trie.Speculate({9, 8}, limits).tokens.empty()) << "no match";
}

const Tokens kPrompt = {1, 5, 3, 7, 2, 5, 3};

// Limits that let short matches draft (factor 2, continuations of 5% and
// more): a chain of 6, or a tree of 12 on paths of 6.
SpeculationLimits WideLimits(bool tree) {
  SpeculationLimits limits;
  limits.tree = tree;
  limits.max_tokens = tree ? 12 : 6;
  limits.max_path = 6;
  limits.max_spec_factor = 2.0;
  limits.min_token_prob = 0.05;
  return limits;
}

// Asked at the end of its current sequence, the trie takes the nodes of the
// context's suffixes from what Extend() left (no walk from the root): the
// same drafts as a trie of the same counts whose sequence was ended.
TEST(SuffixTrieTest, SpeculatesAtTheSequencesEndAsFromTheRoot) {
  std::mt19937 rng(11);
  int compared = 0;
  for (int vocab : {3, 20}) {
    for (int depth : {1, 5, 64}) {
      Tokens text(300);
      for (auto& t : text) t = static_cast<int32_t>(rng() % vocab);
      SuffixTrie live(depth), ended(depth);
      live.Extend(absl::MakeSpan(text).subspan(0, 100));  // in two calls, as a generation grows
      live.Extend(absl::MakeSpan(text).subspan(100));
      ended.Extend(text);
      ended.EndSequence();
      for (bool tree : {false, true}) {
        const SpeculationLimits limits = WideLimits(tree);
        for (size_t cut : {text.size(), text.size() - 1, size_t{50}}) {  // at the end, and elsewhere
          const absl::Span<const int32_t> context = absl::MakeSpan(text).subspan(0, cut);
          const Draft a = live.Speculate(context, limits), b = ended.Speculate(context, limits);
          EXPECT_EQ(a.tokens, b.tokens) << "vocab " << vocab << ", depth " << depth << ", cut " << cut;
          EXPECT_EQ(a.parents, b.parents);
          EXPECT_EQ(a.probabilities, b.probabilities);
          EXPECT_EQ(a.match_length, b.match_length);
          compared += !a.tokens.empty();
        }
      }
    }
  }
  EXPECT_GT(compared, 12);
}

// A cursor advanced over a text against another trie (the earlier
// generations', of three sequences the text copies from) gives the nodes
// the walks from the root find: the same drafts at the text's end, at any
// depth; elsewhere, and against another trie, it is not taken.
TEST(SuffixTrieTest, CursorFindsWhatWalksFromTheRootFind) {
  std::mt19937 rng(5);
  int compared = 0;
  for (int vocab : {3, 20}) {
    for (int depth : {1, 5, 64}) {
      SuffixTrie earlier(depth), other(depth);
      std::vector<Tokens> outputs(3);
      for (Tokens& output : outputs) {
        output.resize(80 + rng() % 80);
        for (auto& t : output) t = static_cast<int32_t>(rng() % vocab);
        earlier.Extend(output);
        earlier.EndSequence();
      }
      other.Extend(outputs[0]);
      Tokens text;
      SuffixCursor cursor;
      for (int piece = 0; piece < 12; ++piece) {  // noise, then a stretch of an earlier output
        Tokens add(1 + rng() % 4);
        for (auto& t : add) t = static_cast<int32_t>(rng() % vocab);
        const Tokens& from = outputs[rng() % 3];
        const size_t at = rng() % from.size(), length = rng() % 20;
        for (size_t k = 0; k < length && at + k < from.size(); ++k) add.push_back(from[at + k]);
        cursor.Advance(earlier, add);
        text.insert(text.end(), add.begin(), add.end());
        int longest = 0;  // the longest suffix of the text the trie holds
        while (longest < std::min<int>(depth, text.size()) &&
               earlier.Count(absl::MakeSpan(text).subspan(text.size() - longest - 1)) > 0)
          ++longest;
        EXPECT_EQ(cursor.matched(), longest) << "vocab " << vocab << ", depth " << depth;
        for (bool tree : {false, true}) {
          const SpeculationLimits limits = WideLimits(tree);
          for (size_t cut : {text.size(), text.size() / 2}) {
            const absl::Span<const int32_t> context = absl::MakeSpan(text).subspan(0, cut);
            const Draft a = earlier.Speculate(context, limits, &cursor), b = earlier.Speculate(context, limits);
            EXPECT_EQ(a.tokens, b.tokens) << "vocab " << vocab << ", depth " << depth << ", cut " << cut;
            EXPECT_EQ(a.parents, b.parents);
            EXPECT_EQ(a.probabilities, b.probabilities);
            EXPECT_EQ(a.match_length, b.match_length);
            EXPECT_EQ(other.Speculate(context, limits, &cursor).tokens, other.Speculate(context, limits).tokens);
            compared += !a.tokens.empty();
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
}

TEST(SuffixTreeDrafterTest, EqualsGreedyAndLearnsFromEarlierGenerations) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  for (const char* builder : {"{type: chain}", "{type: trie, budget: 12, max_candidates: 12}"}) {
    for (const char* verifier : {"{type: greedy}", "{type: point_mass}"}) {
      for (bool pipeline : {false, true}) {
        auto method = testing::MethodFromYaml(
            absl::StrCat("{name: suffix, drafter: {type: suffix_tree, max_spec_factor: 4}, tree_builder: ", builder,
                         ", verifier: ", verifier, ", length_policy: {type: fixed, gamma: 8}}"),
            target.get());
        ASSERT_TRUE(method.ok()) << method.status();
        const std::string where = absl::StrCat(builder, " ", verifier, pipeline ? " pipelined" : " step by step");
        // The same prompt again: the first output is in the global cache.
        const std::array<int, 2> accepted = testing::AcceptedInTwoRuns(*target, *method, kPrompt, 30, pipeline, where);
        EXPECT_GT(accepted[1], accepted[0]) << where << ": the second run drafts the first's output";
        EXPECT_GE(accepted[1], 20) << where;
      }
    }
  }
}

TEST(SuffixTreeDrafterTest, TrieMatchesTargetLawAtTemperatureOne) {
  constexpr int kRuns = 2000;
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const Tokens prompt = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};  // "2 3" followed by 5 and by 6: a branching tree
  auto method = testing::MethodFromYaml(
      "{name: suffix, drafter: {type: suffix_tree, max_spec_factor: 4, min_token_prob: 0.05}, "
      "tree_builder: {type: trie, budget: 8, max_candidates: 8}, verifier: {type: point_mass}, "
      "length_policy: {type: fixed, gamma: 3}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const testing::TwoTokenSample sample = testing::SampleTwoTokens(*target, *method, prompt, 200, 1000, false);
  EXPECT_GT(sample.branching, 100) << "the trees branched";
  testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, prompt, testing::ExactTwoTokenLaw(*target, prompt, 1.0),
                                              kRuns, "suffix_tree trie");
}

std::vector<Tokens> RandomPrompts(std::mt19937& rng, int count, int length, int vocab) {
  std::vector<Tokens> prompts(count);
  for (Tokens& prompt : prompts) {
    prompt.resize(length);
    for (auto& t : prompt) t = static_cast<int32_t>(rng() % vocab);
  }
  return prompts;
}

TEST(SuffixTreeDrafterTest, PipelinedDraftsAreTheHostTriesDrafts) {
  const c10::Device device = testing::TestDevice();
  std::mt19937 rng(17);
  int compared = 0;
  for (int vocab : {3, 8, 50}) {
    for (int length : {2, 40, 300}) {
      const std::vector<Tokens> prompts = RandomPrompts(rng, 3, length, vocab);
      for (const char* options :
           {"", ", max_depth: 5, max_spec_factor: 4, min_token_prob: 0", ", max_depth: 1, max_spec_offset: 3",
            ", max_spec_factor: 2, max_spec_offset: 1, min_token_prob: 0.3, max_spec_tokens: 5",
            ", max_spec_factor: 8, min_token_prob: 0.05, global_cache: false"}) {
        for (auto [max_tokens, max_candidates] : {std::pair{6, 16}, std::pair{1, 1}, std::pair{16, 64}})
          compared += testing::ExpectPipelinedDraftsOfTheHost(device, absl::StrCat("{type: suffix_tree", options, "}"),
                                                              prompts, 9, max_tokens, max_candidates, vocab);
      }
    }
  }
  EXPECT_GT(compared, 3000);
}

// Thousands of occurrences of the last token, followed by thousands of
// distinct tokens: more (node, token) groups than the device's table holds
// at once (its rounds), every one of them likely enough (min_token_prob 0).
TEST(SuffixTreeDrafterTest, PipelinedDraftsOfManyDistinctContinuations) {
  const c10::Device device = testing::TestDevice();
  std::mt19937 rng(23);
  constexpr int kVocab = 5000;
  Tokens prompt;
  for (int i = 0; i < 3000; ++i) {
    prompt.push_back(0);
    prompt.push_back(1 + static_cast<int32_t>(rng() % (kVocab - 1)));
    if (i % 7 == 0) prompt.push_back(1 + static_cast<int32_t>(rng() % 5));  // a few frequent ones
  }
  prompt.push_back(0);
  prompt.push_back(0);  // "0 0" occurs nowhere else: the match of one token drafts
  int compared = 0;
  for (const char* options : {", max_spec_factor: 40, min_token_prob: 0", ", max_spec_factor: 40"})
    compared += testing::ExpectPipelinedDraftsOfTheHost(device, absl::StrCat("{type: suffix_tree", options, "}"),
                                                        {prompt}, 3, 8, 64, kVocab);
  EXPECT_GE(compared, 40) << "the first step drafts 40 of the followers";
}

TEST(SuffixTreeDrafterTest, OptionErrorsNameTheKey) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  auto create = [&](const std::string& drafter) {
    return std::string(
        testing::MethodFromYaml(absl::StrCat("{name: s, drafter: ", drafter, ", verifier: {type: greedy}}"),
                                target.get())
            .status()
            .message());
  };
  EXPECT_THAT(create("{type: suffix_tree, max_depth: 0}"), HasSubstr("key 'drafter.max_depth'"));
  EXPECT_THAT(create("{type: suffix_tree, min_token_prob: 1.5}"), HasSubstr("key 'drafter.min_token_prob'"));
  EXPECT_THAT(create("{type: suffix_tree, max_spec_factor: -1}"), HasSubstr("key 'drafter.max_spec_factor'"));
  EXPECT_THAT(create("{type: suffix_tree, max_spec_tokens: -1}"), HasSubstr("key 'drafter.max_spec_tokens'"));
  EXPECT_THAT(create("{type: suffix_tree, global_cache: maybe}"), HasSubstr("key 'drafter.global_cache'"));
  EXPECT_THAT(create("{type: suffix_tree, depth: 3}"), HasSubstr("unknown key 'drafter.depth'"));
}

}  // namespace
}  // namespace speclab::suffix_decoding
