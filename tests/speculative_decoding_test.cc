// End-to-end properties of the decoding engine on tiny random model pairs:
// greedy equality at temperature 0, the exact output law at temperature 1
// (statistical), determinism under a seed, and config-time refusals.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "framework/speculative_decoder.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::speclab::testing::MethodFromYaml;
using ::speclab::testing::ModelDrafterMethod;
using ::speclab::testing::ChiSquareResult;
using ::speclab::testing::ChiSquareTest;
using ::speclab::testing::ExactTwoTokenLaw;
using ::speclab::testing::KernelSizedModel;
using ::speclab::testing::TinyModel;
using ::speclab::testing::TwoTokenCounts;
using ::testing::HasSubstr;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3};

DecodeOptions Options(double temperature, int max_new, uint64_t seed, bool verify_on_device = true) {
  return {.sampling = {.temperature = temperature}, .max_new_tokens = max_new, .seed = seed, .time_phases = false,
          .verify_on_device = verify_on_device};
}

std::vector<int32_t> Greedy(LanguageModel& target, int max_new) {
  auto out = GenerateAutoregressive(target, kPrompt, Options(0, max_new, 0));
  EXPECT_TRUE(out.ok()) << out.status();
  return out->tokens;
}

TEST(SpeculativeDecodingTest, ChainRejectionEqualsGreedyAtTemperatureZero) {
  auto target = TinyModel(1);
  const std::vector<int32_t> expected = Greedy(*target, 40);
  for (uint64_t drafter_seed : {1, 2}) {  // 1: the target itself (all accepted); 2: a different model
    for (const char* verifier : {"{type: rejection}", "{type: greedy}", "{type: point_mass}"}) {
      for (bool on_device : {true, false}) {
      Method method = ModelDrafterMethod(TinyModel(drafter_seed), "{type: chain}", verifier, 4);
      ASSERT_NE(method.device_verifier, nullptr) << verifier;
      auto out = GenerateSpeculative(*target, method, kPrompt, Options(0, 40, 0, on_device));
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->tokens, expected) << "drafter " << drafter_seed << " verifier " << verifier << " device "
                                       << on_device;
      int accepted = 0;
      for (const StepStats& s : out->steps) accepted += s.accepted;
      if (drafter_seed == 1) EXPECT_EQ(accepted + static_cast<int>(out->steps.size()), 40);
      }
    }
  }
}

TEST(SpeculativeDecodingTest, PromptLookupGreedyEqualsGreedy) {
  // Step by step (drafts of up to gamma tokens from the host's context) and
  // pipelined (exactly gamma tokens from the device's: every step's forward
  // has gamma + 1 tokens), with either rule that verifies tokens-only drafts.
  auto target = TinyModel(3);
  const std::vector<int32_t> expected = Greedy(*target, 30);
  for (const char* verifier : {"{type: greedy}", "{type: point_mass}"}) {
    for (bool pipeline : {false, true}) {
      auto method = MethodFromYaml(absl::StrCat("{name: pld, drafter: {type: prompt_lookup, max_ngram_size: 2, "
                                                "num_pred_tokens: 5}, verifier: ",
                                                verifier, ", length_policy: {type: fixed, gamma: 5}}"),
                                   target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      DecodeOptions options = Options(0, 30, 0);
      options.pipeline = pipeline;
      auto out = GenerateSpeculative(*target, *method, kPrompt, options);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->tokens, expected) << verifier << " pipeline " << pipeline;
      int full_steps = 0;
      for (const StepStats& step : out->steps) full_steps += step.tree_nodes == 5;
      if (pipeline) EXPECT_EQ(full_steps, static_cast<int>(out->steps.size())) << verifier;
    }
  }
}

// Every prompt-lookup match merged into a tree (the trie builder): greedy's
// tokens at T = 0 with either token-only rule, and trees that did branch.
TEST(SpeculativeDecodingTest, PromptLookupTrieEqualsGreedy) {
  auto target = TinyModel(3, /*vocab=*/8);
  const std::vector<int32_t> expected = Greedy(*target, 30);
  for (const char* verifier : {"{type: greedy}", "{type: point_mass}"}) {
    auto method = MethodFromYaml(absl::StrCat("{name: pld_trie, drafter: {type: prompt_lookup, max_ngram_size: 2, "
                                              "num_pred_tokens: 4}, tree_builder: {type: trie, budget: 12}, "
                                              "verifier: ", verifier, ", length_policy: {type: fixed, gamma: 4}}"),
                                 target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, kPrompt, Options(0, 30, 0));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, expected) << verifier;
    int branching = 0;  // a vocabulary of 8 repeats itself: several matches
    for (const StepStats& step : out->steps) branching += step.tree_nodes > step.longest_path;
    EXPECT_GT(branching, 0) << "some step should have drafted several matches";
  }
}

// Pipelined prompt lookup at temperature 1 samples the target's law (the
// fill rule's drafts included): two-token generations against the
// enumerated law, as ChainLawTest.
TEST(SpeculativeDecodingTest, PipelinedPromptLookupMatchesTargetLawAtTemperatureOne) {
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const auto law = ExactTwoTokenLaw(*target, kPrompt, 1.0);
  auto method = MethodFromYaml("{name: pld, drafter: {type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 3}, "
                               "verifier: {type: point_mass}, length_policy: {type: fixed, gamma: 3}}",
                               target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  TwoTokenCounts counts;
  int accepted = 0;
  for (int i = 0; i < kRuns; ++i) {
    auto out = GenerateSpeculative(*target, *method, kPrompt, Options(1, 2, 1000 + i));
    ASSERT_TRUE(out.ok()) << out.status();
    ++counts[{out->tokens[0], out->tokens[1]}];
    for (const StepStats& step : out->steps) {
      accepted += step.accepted;
      ASSERT_EQ(step.tree_nodes, 3);  // every step pipelined: gamma drafts, filled where lookup gives fewer
    }
  }
  const ChiSquareResult result = ChiSquareTest(counts, law, kRuns);
  EXPECT_LT(result.statistic, result.critical) << "dof " << result.degrees_of_freedom;
  EXPECT_GT(accepted, kRuns / 20);  // drafts were accepted, so the law test saw the rule at work

  // The same law with every match merged into a tree, after a prompt whose
  // root has two distinct matches ("3" at 1 and at 4), so the trees branch.
  const std::vector<int32_t> branching_prompt = {1, 3, 5, 2, 3, 6, 4, 3};
  const auto branching_law = ExactTwoTokenLaw(*target, branching_prompt, 1.0);
  auto trie = MethodFromYaml("{name: pld_trie, drafter: {type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 3}, "
                             "tree_builder: {type: trie, budget: 8}, verifier: {type: point_mass}, "
                             "length_policy: {type: fixed, gamma: 3}}",
                             target.get());
  ASSERT_TRUE(trie.ok()) << trie.status();
  TwoTokenCounts trie_counts;
  int trie_accepted = 0, branching = 0;
  for (int i = 0; i < kRuns; ++i) {
    auto out = GenerateSpeculative(*target, *trie, branching_prompt, Options(1, 2, 1000 + i));
    ASSERT_TRUE(out.ok()) << out.status();
    ++trie_counts[{out->tokens[0], out->tokens[1]}];
    for (const StepStats& step : out->steps) {
      trie_accepted += step.accepted;
      branching += step.tree_nodes > step.longest_path;
    }
  }
  const ChiSquareResult trie_result = ChiSquareTest(trie_counts, branching_law, kRuns);
  EXPECT_LT(trie_result.statistic, trie_result.critical) << "trie, dof " << trie_result.degrees_of_freedom;
  EXPECT_GT(trie_accepted, kRuns / 20);
  EXPECT_GT(branching, kRuns / 2) << "the trees branched";

  // Negative control: the greedy rule at T=1 (lossy there) on the same drafts is caught.
  constexpr int kControlRuns = 300;
  auto lossy = MethodFromYaml("{name: pld, drafter: {type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 3}, "
                              "verifier: {type: greedy}, length_policy: {type: fixed, gamma: 3}}",
                              target.get());
  ASSERT_TRUE(lossy.ok()) << lossy.status();
  TwoTokenCounts lossy_counts;
  for (int i = 0; i < kControlRuns; ++i) {
    auto out = GenerateSpeculative(*target, *lossy, kPrompt, Options(1, 2, 1000 + i));
    ASSERT_TRUE(out.ok()) << out.status();
    ++lossy_counts[{out->tokens[0], out->tokens[1]}];
  }
  const ChiSquareResult control = ChiSquareTest(lossy_counts, law, kControlRuns);
  EXPECT_GT(control.statistic, control.critical);
}

// A batch-invariant bf16 target on CUDA (LlamaModel::SetBatchInvariant):
// chains verified by rejection and by block verification, trees of every
// device-grown builder, and pipelined prompt lookup, reproduce greedy
// decoding token for token. Random weights
// give near-flat logits, where bf16 near-ties are everywhere.
TEST(SpeculativeDecodingTest, BatchInvariantBf16MethodsEqualGreedyOnCuda) {
  SPECLAB_SKIP_UNLESS_CUDA();
  auto make = [](uint64_t seed) { return KernelSizedModel(c10::Device(c10::kCUDA), at::kBFloat16, seed); };
  std::unique_ptr<LlamaModel> target = make(1);
  target->SetBatchInvariant(true);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 30; ++i) prompt.push_back((i * 7) % 11 + 3);  // repeats, so that lookup finds matches
  const DecodeOptions options = Options(0, 48, 0);
  auto greedy = GenerateAutoregressive(*target, prompt, options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  // Drafter 1: the target's weights and numerics (its drafts are greedy's, all accepted); 2: another model.
  for (uint64_t drafter_seed : {1, 2}) {
    for (const char* verifier : {"{type: rejection}", "{type: block}"}) {
      std::unique_ptr<LlamaModel> drafter = make(drafter_seed);
      drafter->SetBatchInvariant(drafter_seed == 1);
      Method method = ModelDrafterMethod(std::move(drafter), "{type: chain}", verifier, 4);
      auto out = GenerateSpeculative(*target, method, prompt, options);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->tokens, greedy->tokens) << verifier << ", drafter " << drafter_seed;
      int accepted = 0;
      for (const StepStats& step : out->steps) accepted += step.accepted;
      if (drafter_seed == 1) EXPECT_GT(accepted, 12) << verifier;  // multi-token forwards decided most tokens
    }
  }
  // Trees too (pipelined on CUDA): their tokens' ancestors sit in tentative
  // slots with siblings between them, and the ordered attention kernel still
  // gives each token greedy decoding's logits.
  const std::vector<std::pair<const char*, const char*>> trees = {
      {"{type: static, choices: [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]}", "{type: point_mass}"},
      {"{type: static, sampling: true, choices: [[0], [1], [0, 0], [1, 0], [0, 0, 0]]}", "{type: rrs_wor}"},
      {"{type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 8}", "{type: greedy}"},
      {"{type: multi_sample, k: 3}", "{type: specinfer}"}};
  for (uint64_t drafter_seed : {1, 2}) {
    for (const auto& [builder, verifier] : trees) {
      std::unique_ptr<LlamaModel> drafter = make(drafter_seed);
      drafter->SetBatchInvariant(drafter_seed == 1);
      Method method = ModelDrafterMethod(std::move(drafter), builder, verifier, 4);
      auto out = GenerateSpeculative(*target, method, prompt, options);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->tokens, greedy->tokens) << builder << " " << verifier << ", drafter " << drafter_seed;
    }
  }
  auto lookup = MethodFromYaml("{name: pld, drafter: {type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 5}, "
                               "verifier: {type: point_mass}, length_policy: {type: fixed, gamma: 5}}",
                               target.get());
  ASSERT_TRUE(lookup.ok()) << lookup.status();
  auto out = GenerateSpeculative(*target, *lookup, prompt, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens) << "prompt lookup";
}

TEST(SpeculativeDecodingTest, SameSeedSameTokens) {
  auto target = TinyModel(4);
  Method method = ModelDrafterMethod(TinyModel(5), "{type: chain}", "{type: rejection}", 3);
  auto a = GenerateSpeculative(*target, method, kPrompt, Options(1, 25, 11));
  auto b = GenerateSpeculative(*target, method, kPrompt, Options(1, 25, 11));
  auto c = GenerateSpeculative(*target, method, kPrompt, Options(1, 25, 12));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
}

TEST(SpeculativeDecodingTest, PipelinedChainsDrawTheStepByStepTokens) {
  // The pipelined loop queues step k + 1 before it reads step k back. Each
  // generator draws the same values in the same order, so with one seed it
  // must emit the step-by-step loop's tokens with the same acceptances, at
  // both temperatures and with top-k/top-p truncation, stop at EOS where that does, and leave the target's
  // cache as that does. The drafter's static shapes (its device chain code,
  // eager on the CPU) feed the token before the root again in a two-token
  // forward: its count shows the pipelined loop ran.
  auto target = TinyModel(4);
  for (const char* verifier : {"{type: rejection}", "{type: block}", "{type: point_mass}"}) {
    for (const SamplingParams& sampling : {SamplingParams{.temperature = 0}, SamplingParams{.temperature = 1},
                                           SamplingParams{.temperature = 0.8, .top_k = 6, .top_p = 0.9}}) {
      for (int32_t eos : {-1, 9}) {
        SCOPED_TRACE(absl::StrCat(verifier, " T=", sampling.temperature, " top_k ", sampling.top_k, " eos ", eos));
        Generation runs[2];
        int64_t cache[2];
        for (bool pipeline : {false, true}) {
          std::unique_ptr<LlamaModel> drafter = TinyModel(5);
          drafter->EnableCudaGraphs(true);
          Method method = ModelDrafterMethod(std::move(drafter), "{type: chain}", verifier, 3);
          DecodeOptions options = Options(sampling.temperature, 30, 21);
          options.sampling = sampling;
          options.eos_token = eos;
          options.pipeline = pipeline;
          auto out = GenerateSpeculative(*target, method, kPrompt, options);
          ASSERT_TRUE(out.ok()) << out.status();
          EXPECT_EQ(out->draft_forwards.count(2), pipeline ? 1u : 0u);
          runs[pipeline] = *std::move(out);
          cache[pipeline] = target->committed_length();
        }
        EXPECT_EQ(runs[1].tokens, runs[0].tokens);
        ASSERT_EQ(runs[1].steps.size(), runs[0].steps.size());
        for (size_t i = 0; i < runs[0].steps.size(); ++i) EXPECT_EQ(runs[1].steps[i].accepted, runs[0].steps[i].accepted);
        EXPECT_EQ(cache[1], cache[0]);
        // At most the one step queued past the end is extra work.
        EXPECT_LE(runs[1].target_forwards[4] - runs[0].target_forwards[4], 1);
        if (eos >= 0 && std::find(runs[0].tokens.begin(), runs[0].tokens.end(), eos) != runs[0].tokens.end())
          EXPECT_EQ(runs[0].tokens.back(), eos);
      }
    }
  }
}

// Chain speculative sampling at temperature 1 samples exactly the target's law:
// 2000 two-token generations against the enumerated law (Pearson chi-square at
// a 1e-4 false-alarm level), plus a negative control showing the test has power.
// (Exactness itself is proven by enumeration in the verifier tests; this checks
// the engine around the verifier: drafting law, q rows, commit, extra token.)
// Parameters: the verifier, and where it runs: "host" (the host rule, step by
// step), "device" (its device form in the pipelined loop, the default) or
// "device_step_by_step".
class ChainLawTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ChainLawTest, MatchesTargetLawAtTemperatureOne) {
  const std::string verifier = "{type: " + std::get<0>(GetParam()) + "}";
  const std::string where = std::get<1>(GetParam());
  const bool on_device = where != "host";
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const auto law = ExactTwoTokenLaw(*target, kPrompt, 1.0);
  auto sample = [&](Method* method, uint64_t seed) {
    DecodeOptions options = Options(1, 2, seed, on_device);
    options.pipeline = where == "device";
    auto out = method ? GenerateSpeculative(*target, *method, kPrompt, options)
                      : GenerateAutoregressive(*target, kPrompt, Options(1, 2, seed));
    EXPECT_TRUE(out.ok()) << out.status();
    return std::pair<int, int>{out->tokens[0], out->tokens[1]};
  };
  Method method = ModelDrafterMethod(TinyModel(8, 8, 1, 40), "{type: chain}", verifier, 2);
  if (on_device) ASSERT_NE(method.device_verifier, nullptr);
  TwoTokenCounts counts;
  for (int i = 0; i < kRuns; ++i) ++counts[sample(&method, 1000 + i)];
  const ChiSquareResult result = ChiSquareTest(counts, law, kRuns);
  EXPECT_LT(result.statistic, result.critical) << "dof " << result.degrees_of_freedom;

  // Negative control: the greedy verifier at T=1 (lossy there) is caught.
  constexpr int kControlRuns = 300;
  Method lossy = ModelDrafterMethod(TinyModel(8, 8, 1, 40), "{type: chain}", "{type: greedy}", 2);
  TwoTokenCounts lossy_counts;
  for (int i = 0; i < kControlRuns; ++i) ++lossy_counts[sample(&lossy, 1000 + i)];
  const ChiSquareResult control = ChiSquareTest(lossy_counts, law, kControlRuns);
  EXPECT_GT(control.statistic, control.critical);
}

// A drafter with sampling settings of its own (a method's draft_sampling:):
// drafts drawn at temperature 0.5 and top-k 3 from the drafter while the target
// samples at temperature 1. Verifiers read the q the drafts came from, so the
// output keeps the target's law, with the host rule and with its device form.
TEST(DrafterSamplingTest, DraftingAtItsOwnTemperatureKeepsTheTargetLaw) {
  constexpr int kRuns = 2000;
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const auto law = ExactTwoTokenLaw(*target, kPrompt, 1.0);
  for (const bool on_device : {false, true}) {
    Method method = ModelDrafterMethod(TinyModel(8, 8, 1, 40), "{type: chain}", "{type: rejection}", 2);
    method.drafter_sampling = {.temperature = 0.5, .top_k = 3};
    TwoTokenCounts counts;
    for (int i = 0; i < kRuns; ++i) {
      auto out = GenerateSpeculative(*target, method, kPrompt, Options(1, 2, 3000 + i, on_device));
      ASSERT_TRUE(out.ok()) << out.status();
      ++counts[{out->tokens[0], out->tokens[1]}];
    }
    const ChiSquareResult result = ChiSquareTest(counts, law, kRuns);
    EXPECT_LT(result.statistic, result.critical) << (on_device ? "device" : "host") << ", dof "
                                                 << result.degrees_of_freedom;
  }
}

// Every generation says how its steps ran, and where not pipelined, why,
// naming the option or the plugin.
TEST(EngineFormTest, GenerationsSayHowTheirStepsRanAndWhy) {
  auto target = TinyModel(7, 8, 1, 40);
  DecodeOptions options = Options(1, 6, 1, /*verify_on_device=*/true);
  auto form = [&](Method& method, const DecodeOptions& o) {
    auto out = GenerateSpeculative(*target, method, kPrompt, o);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->engine_form : std::string();
  };
  Method chain = ModelDrafterMethod(TinyModel(8, 8, 1, 40), "{type: chain}", "{type: rejection}", 2);
  options.pipeline = true;
  EXPECT_EQ(form(chain, options), "pipelined chain");
  options.pipeline = false;
  EXPECT_EQ(form(chain, options), "step by step: decoding.pipeline is off (its default off CUDA)");
  options.pipeline = true;
  // The part without a device form is named, and so is a device form's refusal.
  Method host_builder = ModelDrafterMethod(
      TinyModel(8, 8, 1, 40),
      "{type: opt_tree, nodes: 4, max_depth: 3, latency_profile: {budgets: [1, 5], target_ms: [1, 1.3], draft_ms: 0.1}}",
      "{type: point_mass}", 2);
  EXPECT_THAT(form(host_builder, options), HasSubstr("step by step: the tree builder 'opt_tree' or the drafter 'model' "
                                                     "cannot draft from a root on the device: opt_tree grows on the "
                                                     "device only by its threshold"));
  Method host_rule =
      ModelDrafterMethod(TinyModel(8, 8, 1, 40), "{type: multi_sample, k: 2}", "{type: host_only_rrs}", 2);
  EXPECT_THAT(form(host_rule, options), HasSubstr("step by step: the verifier 'host_only_rrs' has no device form"));
  // A device form that declines an option of its rule says so.
  Method host_variant = ModelDrafterMethod(TinyModel(8, 8, 1, 40), "{type: multi_sample, k: 2}",
                                           "{type: khisti, selection: optimal}", 2);
  EXPECT_THAT(form(host_variant, options),
              HasSubstr("step by step: the verifier 'khisti' has no device form with these options: selection: optimal"));
  auto autoregressive = GenerateAutoregressive(*target, kPrompt, options);
  ASSERT_TRUE(autoregressive.ok());
  EXPECT_EQ(autoregressive->engine_form, "autoregressive");
}

// draft_sampling: in a method's config: each key optional, values checked.
TEST(DrafterSamplingTest, ConfigKeysAreReadAndChecked) {
  auto target = TinyModel(7, 8, 1, 40);
  auto method = MethodFromYaml(
      "{name: m, drafter: {type: prompt_lookup}, verifier: {type: point_mass}, draft_sampling: {top_k: 3}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  EXPECT_EQ(method->drafter_sampling.For({.temperature = 0.7}).top_k, 3);
  EXPECT_EQ(method->drafter_sampling.For({.temperature = 0.7}).temperature, 0.7);
  for (const char* bad : {"{temperature: 0}", "{top_p: 1.5}", "{top_k: -1}", "{temprature: 1}"}) {
    auto refused = MethodFromYaml(absl::StrCat("{name: m, drafter: {type: prompt_lookup}, verifier: {type: point_mass}, "
                                               "draft_sampling: ", bad, "}"),
                                  target.get());
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("draft_sampling")) << bad;
  }
}

// Every lossless chain rule: token-wise rejection, the point-mass rule and
// block verification, each on the host and pipelined on the device, and
// rejection's device form step by step.
INSTANTIATE_TEST_SUITE_P(Verifiers, ChainLawTest,
                         ::testing::Values(std::make_tuple("rejection", "host"), std::make_tuple("rejection", "device"),
                                           std::make_tuple("rejection", "device_step_by_step"),
                                           std::make_tuple("point_mass", "host"), std::make_tuple("point_mass", "device"),
                                           std::make_tuple("block", "host"), std::make_tuple("block", "device")),
                         [](const ::testing::TestParamInfo<ChainLawTest::ParamType>& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

TEST(SpeculativeDecodingTest, IncompatibleCombinationsAreRefusedAtLoad) {
  auto target = TinyModel(1);
  auto pld_rejection = MethodFromYaml(
      "{name: bad, drafter: {type: prompt_lookup}, verifier: {type: rejection}}", target.get());
  ASSERT_FALSE(pld_rejection.ok());
  EXPECT_THAT(pld_rejection.status().message(), HasSubstr("gives tokens only"));
  EXPECT_THAT(pld_rejection.status().message(), HasSubstr("test.yaml:1"));
  auto unknown = MethodFromYaml("{name: bad, drafter: {type: nope}, verifier: {type: greedy}}", target.get());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown drafter 'nope' (registered:"));
  auto typo = MethodFromYaml("{name: bad, drafter: {type: prompt_lookup, ngram: 3}, verifier: {type: greedy}}",
                             target.get());
  EXPECT_THAT(typo.status().message(), HasSubstr("unknown key 'drafter.ngram'"));
  // A misspelt required key is reported as missing and as unknown.
  auto misspelt = MethodFromYaml("{name: bad, drafter: {type: model, pth: x}, verifier: {type: greedy}}", target.get());
  EXPECT_THAT(misspelt.status().message(), HasSubstr("key 'drafter.path': missing required key"));
  EXPECT_THAT(misspelt.status().message(), HasSubstr("unknown key 'drafter.pth' (expected one of: path, type)"));
}

TEST(SpeculativeDecodingTest, AutoregressiveRunAheadLeavesTheCacheAsIfNone) {
  // The loop queues each forward before reading the last token back; where
  // generation stops (EOS or the budget) the cache must hold exactly the
  // prompt and every emitted token but the last, and stopping at EOS must
  // give the same tokens as the budget cut at that point.
  auto target = TinyModel(1);
  const std::vector<int32_t> free_run = Greedy(*target, 12);
  EXPECT_EQ(target->committed_length(), static_cast<int64_t>(kPrompt.size() + free_run.size()) - 1);
  DecodeOptions at_eos = Options(0, 12, 0);
  at_eos.eos_token = free_run[5];
  auto stopped = GenerateAutoregressive(*target, kPrompt, at_eos);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  const auto first_eos = std::find(free_run.begin(), free_run.end(), at_eos.eos_token);
  EXPECT_EQ(stopped->tokens, std::vector<int32_t>(free_run.begin(), first_eos + 1));
  EXPECT_EQ(target->committed_length(), static_cast<int64_t>(kPrompt.size() + stopped->tokens.size()) - 1);
}

TEST(SpeculativeDecodingTest, CapacityIsReportedNotCrashed) {
  auto target = TinyModel(1, 16, 1, 30, /*capacity=*/16);
  auto out = GenerateAutoregressive(*target, kPrompt, Options(0, 40, 0));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("kv_capacity"));
}

}  // namespace
}  // namespace speclab
