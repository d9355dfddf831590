// The cascade drafts what its drafter alone drafts (the same q, so the same
// drafts and verdicts at T = 0) with fewer of the drafter's forwards where
// the proposer guesses well, pipelined and step by step; it keeps the
// target's law at T = 1 in both forms; and its options name what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/model/llama_model.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::speclab::testing::MethodFromYaml;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

// Repetitive, so that prompt lookup has something to propose.
const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3, 7, 2, 5, 3, 7, 2, 5};
constexpr char kDrafter[] = "{type: layer_skip, exit_layer: 1}";
constexpr char kProposer[] = "{type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 4}";

std::string Cascade(const std::string& rest) {
  return absl::StrCat("{name: m, drafter: {type: cascade, drafter: ", kDrafter, ", proposer: ", kProposer,
                      ", proposal_tokens: 4}, ", rest, "}");
}

int64_t Passes(Method& method) {
  int64_t passes = 0;
  for (LanguageModel* model : method.drafter->models())
    for (const auto& [tokens, count] : dynamic_cast<LlamaModel&>(*model).executed_passes()) passes += count;
  return passes;
}

TEST(CascadeTest, DraftsWhatItsDrafterDraftsWithFewerForwards) {
  // Pipelined and step by step. A chain drafts in rounds either way (on the
  // device: the drafter's chain in rounds, prompt lookup's guess); a tree
  // grown level by level takes guesses only step by step, and pipelined is
  // the drafter's own levels, forward for forward.
  auto target = TinyModel(1, /*vocab=*/16, /*layers=*/3);
  const DecodeOptions greedy_options{.sampling = {.temperature = 0}, .max_new_tokens = 32, .time_phases = false};
  auto greedy = GenerateAutoregressive(*target, kPrompt, greedy_options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  struct Case {
    const char* parts;
    bool pipeline;
    const char* engine;
    bool fewer_forwards;
  };
  const std::string tree =
      "tree_builder: {type: dynamic_topk, top_k: 2, depth: 4, total_tokens: 8}, verifier: {type: point_mass}";
  const std::string chain = "verifier: {type: greedy}, length_policy: {type: fixed, gamma: 4}";
  for (const Case& c :
       {Case{chain.c_str(), true, "pipelined chain", true}, Case{chain.c_str(), false, "step by step", true},
        Case{tree.c_str(), true, "pipelined tree", false}, Case{tree.c_str(), false, "step by step", true}}) {
    SCOPED_TRACE(absl::StrCat(c.parts, c.pipeline ? ", pipelined" : ", step by step"));
    DecodeOptions options = greedy_options;
    options.pipeline = c.pipeline;
    auto alone = MethodFromYaml(absl::StrCat("{name: m, drafter: ", kDrafter, ", ", c.parts, "}"), target.get());
    auto cascade = MethodFromYaml(Cascade(c.parts), target.get());
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_TRUE(cascade.ok()) << cascade.status();
    auto a = GenerateSpeculative(*target, *alone, kPrompt, options);
    auto k = GenerateSpeculative(*target, *cascade, kPrompt, options);
    ASSERT_TRUE(a.ok() && k.ok()) << k.status();
    EXPECT_THAT(k->engine_form, ::testing::StartsWith(c.engine));
    EXPECT_EQ(k->tokens, greedy->tokens);
    EXPECT_EQ(a->tokens, greedy->tokens);
    ASSERT_EQ(k->steps.size(), a->steps.size());
    int accepted = 0;
    for (size_t i = 0; i < a->steps.size(); ++i) {
      EXPECT_EQ(k->steps[i].accepted, a->steps[i].accepted) << "step " << i;
      EXPECT_EQ(k->steps[i].tree_nodes, a->steps[i].tree_nodes) << "step " << i;
      accepted += a->steps[i].accepted;
    }
    EXPECT_GT(accepted, 0) << "no draft accepted: the comparison would not see the drafts";
    if (c.fewer_forwards) {
      EXPECT_LT(Passes(*cascade), Passes(*alone)) << "the proposer's guesses saved no forward";
    } else {
      EXPECT_EQ(Passes(*cascade), Passes(*alone));
    }
  }
}

TEST(CascadeTest, ProposersThatLearnOnlineStepOnTheHostAndSaySo) {
  // An n-gram cache learns from the roots it sees, so its guesses are no
  // function of the sequence alone: no rounds on the device.
  auto target = TinyModel(1, /*vocab=*/16, /*layers=*/2);
  auto method = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: cascade, drafter: ", kDrafter,
                                            ", proposer: {type: ngram_cache}}, verifier: {type: greedy}, "
                                            "length_policy: {type: fixed, gamma: 3}}"),
                               target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 8, .time_phases = false};
  auto out = GenerateSpeculative(*target, *method, kPrompt, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->engine_form, ::testing::StartsWith("step by step"));
  EXPECT_THAT(out->engine_form, HasSubstr("cascade's proposer"));
}

TEST(CascadeTest, RejectionSamplingKeepsTheTargetsLaw) {
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/2, /*logit_scale=*/40);
  const testing::TwoTokenLaw law = testing::ExactTwoTokenLaw(*target, kPrompt, 1.0);
  for (const char* parts : {"verifier: {type: rejection}, length_policy: {type: fixed, gamma: 3}",
                            "tree_builder: {type: multi_sample, k: 2}, verifier: {type: specinfer}, length_policy: "
                            "{type: fixed, gamma: 2}"}) {
    SCOPED_TRACE(parts);
    auto method = MethodFromYaml(Cascade(parts), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    for (bool pipeline : {true, false}) {
      SCOPED_TRACE(pipeline ? "pipelined" : "step by step");
      const testing::TwoTokenSample sample = testing::SampleTwoTokens(*target, *method, kPrompt, kRuns, 300, pipeline);
      const auto [statistic, dof, critical] = testing::ChiSquareTest(sample.counts, law, kRuns);
      EXPECT_LT(statistic, critical);
      EXPECT_GT(sample.accepted, kRuns / 10) << "drafts were rarely accepted; the test would not exercise acceptance";
    }
  }
}

TEST(CascadeTest, OptionsNameWhatIsWrong) {
  auto target = TinyModel(1, /*vocab=*/16, /*layers=*/2);
  auto message = [&](const std::string& drafter) {
    return std::string(
        MethodFromYaml(absl::StrCat("{name: m, drafter: ", drafter, ", verifier: {type: greedy}}"), target.get())
            .status()
            .message());
  };
  EXPECT_THAT(message(absl::StrCat("{type: cascade, drafter: ", kProposer, ", proposer: ", kProposer, "}")),
              HasSubstr("make it the proposer"));
  EXPECT_THAT(message(absl::StrCat("{type: cascade, drafter: ", kDrafter, ", proposer: ", kDrafter, "}")),
              HasSubstr("token-only"));
  EXPECT_THAT(message(absl::StrCat("{type: cascade, drafter: ", kDrafter, "}")), HasSubstr("proposer"));
  EXPECT_THAT(message(absl::StrCat("{type: cascade, drafter: ", kDrafter, ", proposer: ", kProposer,
                                   ", proposal_tokens: 0}")),
              HasSubstr("drafter.proposal_tokens"));
  EXPECT_THAT(message(absl::StrCat("{type: cascade, drafter: ", kDrafter, ", proposer: ", kProposer, ", depth: 2}")),
              HasSubstr("depth"));
}

}  // namespace
}  // namespace speclab
