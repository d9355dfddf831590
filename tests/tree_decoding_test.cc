// End-to-end tests of every tree builder in the decoding engine, on tiny
// random model pairs: greedy equality at temperature 0 (greedy, point_mass
// and the q-based rules the builder's law admits), the exact output law at
// temperature 1 (statistical) for each builder with the verifiers it is meant
// for, the refusals, and the comparison configs.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "drafters/model/model_drafter.h"
#include "framework/core/verifier_registry.h"
#include "framework/speculative_decoder.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::speclab::testing::ModelDrafterMethod;
using ::speclab::testing::TestDevice;
using ::speclab::testing::TinyModel;
using ::speclab::testing::TinyModelOn;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5, 3};

const std::string kEagleTree =
    std::string("{type: static, choices_file: ") + SPECLAB_SOURCE_DIR + "/configs/trees/eagle_mc_sim_7b_63.yaml}";
const std::string kSampledTree = "{type: static, sampling: true, choices: [[0], [1], [2], [0, 0], [0, 1], [1, 0]]}";
const std::string kSequoia =
    "{type: sequoia, budget: 10, max_depth: 4, acceptance: [0.6, 0.15, 0.08, 0.04]}";
const std::string kDynamic = "{type: dynamic_topk, top_k: 4, depth: 3, total_tokens: 16}";
const std::string kMultiIid = "{type: multi_sample, k: 3}";
const std::string kMultiWor = "{type: multi_sample, k: 3, replacement: false}";
const std::string kBestFirst = "{type: best_first, budget: 12, max_beam_len: 5}";
const std::string kOptTree = "{type: opt_tree, nodes: 6, threshold: 0.05, max_depth: 5}";
const std::string kOptTreeProfile =
    "{type: opt_tree, nodes: 6, max_depth: 5, latency_profile: {budgets: [1, 4, 8], target_ms: [1, 1.1, 1.6], "
    "draft_ms: 0.1}}";

DecodeOptions Decoding(double temperature, int max_new, uint64_t seed) {
  return {.sampling = {.temperature = temperature}, .max_new_tokens = max_new, .seed = seed, .time_phases = false};
}

std::string Verifier(const std::string& name) { return "{type: " + name + "}"; }

// At T = 0 a builder, with every verifier its draft admits, reproduces greedy
// decoding token for token: with a different drafter, and with the target
// itself as drafter (then, where the rank-0 path is the deepest, every step
// accepts the whole depth, which checks the tree forward's mask and positions).
void ExpectGreedy(const std::string& builder, const std::vector<std::string>& verifiers, bool rank0_chain_is_deepest) {
  constexpr int kTokens = 24;
  auto target = TinyModel(1);
  auto greedy = GenerateAutoregressive(*target, kPrompt, Decoding(0, kTokens, 0));
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  for (const std::string& verifier : verifiers) {
    Method method = ModelDrafterMethod(TinyModel(2), builder, Verifier(verifier), 4);
    auto out = GenerateSpeculative(*target, method, kPrompt, Decoding(0, kTokens, 0));
    ASSERT_TRUE(out.ok()) << builder << " + " << verifier << ": " << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << builder << " + " << verifier;
  }
  Method self = ModelDrafterMethod(TinyModel(1), builder, Verifier(verifiers.front()), 4);
  auto out = GenerateSpeculative(*target, self, kPrompt, Decoding(0, kTokens, 0));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens) << builder << " drafted by the target";
  int accepted = 0;
  for (const StepStats& s : out->steps) {
    accepted += s.accepted;
    if (rank0_chain_is_deepest) EXPECT_EQ(s.accepted, s.longest_path) << builder;
  }
  EXPECT_GT(accepted, kTokens / 2) << builder << ": the target drafting for itself should be accepted";
}

TEST(TreeDecodingTest, StaticTopKEqualsGreedyAtTemperatureZero) { ExpectGreedy(kEagleTree, {"point_mass", "greedy"}, true); }
TEST(TreeDecodingTest, StaticSampledEqualsGreedyAtTemperatureZero) {
  ExpectGreedy(kSampledTree, {"point_mass", "greedy"}, true);
}
TEST(TreeDecodingTest, SequoiaEqualsGreedyAtTemperatureZero) { ExpectGreedy(kSequoia, {"point_mass", "greedy"}, false); }
TEST(TreeDecodingTest, DynamicTopKEqualsGreedyAtTemperatureZero) { ExpectGreedy(kDynamic, {"point_mass", "greedy"}, false); }
TEST(TreeDecodingTest, BestFirstEqualsGreedyAtTemperatureZero) { ExpectGreedy(kBestFirst, {"point_mass", "greedy"}, false); }
TEST(TreeDecodingTest, OptTreeEqualsGreedyAtTemperatureZero) {
  ExpectGreedy(kOptTree, {"point_mass", "greedy"}, false);
  ExpectGreedy(kOptTreeProfile, {"point_mass", "greedy"}, false);
}
// At T = 0 multi_sample drafts one greedy chain, which the q-based rules verify too.
TEST(TreeDecodingTest, MultiSampleEqualsGreedyAtTemperatureZero) {
  ExpectGreedy(kMultiIid, {"specinfer", "rrs", "spectr", "khisti"}, true);
}
TEST(TreeDecodingTest, MultiSampleWithoutReplacementEqualsGreedyAtTemperatureZero) {
  ExpectGreedy(kMultiWor, {"rrs_wor", "traversal"}, true);
}

// 2000 two-token generations at T = 1 with a tree method; chi-square (1e-4
// false-alarm level) against the
// target's exact law. Also checks that the trees did branch and that drafts
// were accepted (so the test exercises the tree, not just the extra token).
// How a law test runs its method beyond the defaults.
struct Variant {
  bool verify_on_device = true;
  bool pipeline = false;                  // expects every generation pipelined
  std::optional<int64_t> drafter_top_k;  // draft_sampling's top_k
};

class TreeLawTest : public ::testing::Test {
 protected:
  static constexpr int kRuns = 2000;

  void SetUp() override {
    target_ = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
    law_ = testing::ExactTwoTokenLaw(*target_, kPrompt, 1.0);
  }

  // Returns {chi-square statistic, critical value}.
  std::pair<double, double> Sample(const std::string& builder, const std::string& verifier, Variant variant = {}) {
    const auto start = std::chrono::steady_clock::now();
    // The target's own network at a lower logit scale: q is p at temperature
    // 40/15, different but close enough that trees are accepted deeply.
    Method method = ModelDrafterMethod(TinyModel(7, 8, 1, 15), builder, Verifier(verifier), 2);
    method.drafter_sampling.top_k = variant.drafter_top_k;
    std::map<std::pair<int, int>, int> counts;
    int accepted = 0, branching_steps = 0, steps = 0;
    for (int i = 0; i < kRuns; ++i) {
      DecodeOptions options = Decoding(1, 2, 1000 + i);
      options.verify_on_device = variant.verify_on_device;
      options.pipeline = variant.pipeline;
      auto out = GenerateSpeculative(*target_, method, kPrompt, options);
      if (variant.pipeline && out.ok() && i == 0) EXPECT_EQ(out->engine_form, "pipelined tree");
      EXPECT_TRUE(out.ok()) << builder << " + " << verifier << ": " << out.status();
      if (!out.ok()) return {INFINITY, 0};
      ++counts[{out->tokens[0], out->tokens[1]}];
      for (const StepStats& s : out->steps) {
        accepted += s.accepted;
        branching_steps += s.tree_nodes > s.longest_path;
        ++steps;
      }
    }
    const auto [statistic, dof, critical] = testing::ChiSquareTest(counts, law_, kRuns);
    std::printf("[ tree law ] %-70s + %-10s chi2 %7.1f (critical %.1f), %.2f accepted/step, %.0f%% branching, %.1f s\n",
                builder.c_str(), verifier.c_str(), statistic, critical, static_cast<double>(accepted) / steps,
                100.0 * branching_steps / steps,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_GT(accepted, kRuns / 4) << "drafts were rarely accepted; the test would not exercise the tree";
    EXPECT_GT(branching_steps, steps / 4) << "trees rarely branched";
    return {statistic, critical};
  }

  void ExpectExact(const std::string& builder, const std::string& verifier, Variant variant = {}) {
    auto [statistic, critical] = Sample(builder, verifier, variant);
    EXPECT_LT(statistic, critical) << builder << " + " << verifier;
  }

  std::unique_ptr<LlamaModel> target_;
  std::map<std::pair<int, int>, double> law_;
};


TEST_F(TreeLawTest, MultiSampleSpecInferMatchesTargetLawAtTemperatureOne) { ExpectExact(kMultiIid, "specinfer"); }
TEST_F(TreeLawTest, MultiSampleWithoutReplacementRrsWorMatchesTargetLaw) { ExpectExact(kMultiWor, "rrs_wor"); }
TEST_F(TreeLawTest, StaticSamplingRrsWorMatchesTargetLawAtTemperatureOne) { ExpectExact(kSampledTree, "rrs_wor"); }
TEST_F(TreeLawTest, StaticSamplingTraversalMatchesTargetLawAtTemperatureOne) { ExpectExact(kSampledTree, "traversal"); }
// point_mass verifies trees on the device (sample-then-match, the default)
// or on the host (the rule walking children in order): both exact.
TEST_F(TreeLawTest, DynamicTopKPointMassMatchesTargetLawAtTemperatureOne) {
  ExpectExact("{type: dynamic_topk, top_k: 3, depth: 2, total_tokens: 8}", "point_mass");
}
TEST_F(TreeLawTest, DynamicTopKHostPointMassMatchesTargetLawAtTemperatureOne) {
  ExpectExact("{type: dynamic_topk, top_k: 3, depth: 2, total_tokens: 8}", "point_mass", {.verify_on_device = false});
}
// Static trees grown on the device (common/shape_levels.h): verified by the
// host rule, pipelined, and with draws past q's support (the drafter's q
// truncated to 2 tokens under a root of 3 ranks), which stay in the tree,
// by the device forms and the host rules.
TEST_F(TreeLawTest, StaticSamplingHostRrsWorMatchesTargetLawAtTemperatureOne) {
  ExpectExact(kSampledTree, "rrs_wor", {.verify_on_device = false});
}
TEST_F(TreeLawTest, StaticSamplingPipelinedRrsWorMatchesTargetLawAtTemperatureOne) {
  ExpectExact(kSampledTree, "rrs_wor", {.pipeline = true});
}
TEST_F(TreeLawTest, StaticSamplingPastTheSupportMatchesTargetLawAtTemperatureOne) {
  ExpectExact(kSampledTree, "rrs_wor", {.drafter_top_k = 2});
  ExpectExact(kSampledTree, "traversal", {.drafter_top_k = 2});
  ExpectExact(kSampledTree, "traversal", {.verify_on_device = false, .drafter_top_k = 2});  // the host rule
}
TEST_F(TreeLawTest, MultiSampleSpecTrMatchesTargetLawAtTemperatureOne) { ExpectExact(kMultiIid, "spectr"); }
TEST_F(TreeLawTest, MultiSampleRrsMatchesTargetLawAtTemperatureOne) { ExpectExact(kMultiIid, "rrs"); }
TEST_F(TreeLawTest, MultiSampleKhistiMatchesTargetLawAtTemperatureOne) { ExpectExact(kMultiIid, "khisti"); }
TEST_F(TreeLawTest, SequoiaRrsWorMatchesTargetLawAtTemperatureOne) {
  ExpectExact("{type: sequoia, budget: 7, max_depth: 2, acceptance: [0.6, 0.2, 0.1]}", "rrs_wor");
}
// Grown on the device (best_first_growth.h: free parents, a fixed B + 1
// nodes), step by step and pipelined.
TEST_F(TreeLawTest, BestFirstPointMassMatchesTargetLawAtTemperatureOne) {
  ExpectExact("{type: best_first, budget: 6, max_beam_len: 2}", "point_mass");
  ExpectExact("{type: best_first, budget: 6, max_beam_len: 3, max_n_beams: 2}", "point_mass", {.pipeline = true});
}
// Its depth moves with the drafter's probabilities each step: grown on the
// device by its threshold (opt_tree_levels.h), step by step and pipelined,
// and on the host under a latency profile (its size moves too).
TEST_F(TreeLawTest, OptTreePointMassMatchesTargetLawAtTemperatureOne) {
  ExpectExact("{type: opt_tree, nodes: 4, threshold: 0.1, max_depth: 2}", "point_mass");
  ExpectExact("{type: opt_tree, nodes: 4, threshold: 0.05, max_depth: 3}", "point_mass", {.pipeline = true});
  ExpectExact("{type: opt_tree, nodes: 4, max_depth: 2, latency_profile: {budgets: [1, 5], target_ms: [1, 1.3], "
              "draft_ms: 0.1}}",
              "point_mass");
}

// Negative control: the same sampled tree verified by greedy exact match at
// T = 1 follows the argmax, not the target's law; the test must notice.
TEST_F(TreeLawTest, NegativeControlGreedyOnASampledTreeIsCaught) {
  auto [statistic, critical] = Sample(kSampledTree, "greedy");
  EXPECT_GT(statistic, critical);
}

// Verifiers refuse, at Verify time, drafts whose law they are not exact for.
// At T = 0 a sampling builder's drafts are its top-k picks, which no q is the
// law of: the q-based rules refuse them (their own tests check it), and the
// engine verifies them by greedy exact match, which every lossless rule
// reduces to when p is one-hot; the generation says so, and is greedy's.
TEST(TreeDecodingTest, QBasedRulesOnTopKTreesAtTemperatureZeroAreGreedyExactMatch) {
  auto target = TinyModel(1);
  auto greedy = GenerateAutoregressive(*target, kPrompt, Decoding(0, 24, 0));
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  for (const char* verifier : {"rrs_wor", "traversal"}) {
    // The target itself drafting: deep acceptances, so the walk is exercised.
    for (uint64_t drafter_seed : {1, 2}) {
      Method method = ModelDrafterMethod(TinyModel(drafter_seed), kSampledTree, Verifier(verifier), 4);
      auto at_zero = GenerateSpeculative(*target, method, kPrompt, Decoding(0, 24, 0));
      ASSERT_TRUE(at_zero.ok()) << verifier << ": " << at_zero.status();
      EXPECT_EQ(at_zero->tokens, greedy->tokens) << verifier;
      EXPECT_THAT(at_zero->engine_form, HasSubstr("verified by greedy exact match, which the lossless rule '" +
                                                  std::string(verifier) + "' reduces to when p is one-hot"));
      auto at_one = GenerateSpeculative(*target, method, kPrompt, Decoding(1, 10, 0));
      ASSERT_TRUE(at_one.ok()) << at_one.status();
      EXPECT_THAT(at_one->engine_form, Not(HasSubstr("greedy exact match")));
    }
  }
}

// Config-time refusals follow the builders' traits: a verifier that needs q
// is refused with a builder that picks its tokens instead of sampling them.
TEST(TreeDecodingTest, DeterministicBuildersAreRefusedWithQBasedVerifiers) {
  auto create = [](const std::string& yaml, auto registry) {
    Options spec = *Options::FromString(yaml, "test.yaml");
    return *decltype(registry)::Create(spec, "plugin");
  };
  for (const std::string& builder : {kEagleTree, kDynamic, kBestFirst, kOptTree}) {
    for (const char* verifier : {"rrs_wor", "specinfer", "traversal"}) {
      Method method;
      method.name = "m";
      method.drafter = std::make_unique<ModelDrafter>(TinyModel(2));
      method.tree_builder = create(builder, TreeBuilderRegistry{});
      method.verifier = create(Verifier(verifier), VerifierRegistry{});
      method.policy = create("{type: fixed}", LengthPolicyRegistry{});
      EXPECT_THAT(method.CheckCompatible().message(), HasSubstr("does not sample its tokens")) << builder;
    }
  }
  Method chain_only = ModelDrafterMethod(TinyModel(2), "{type: multi_sample, k: 1}", Verifier("rejection"), 3);
  EXPECT_TRUE(chain_only.CheckCompatible().ok()) << "one sequence is a chain";
}

// The trie builder merges token continuations, which drafters of logits do not give.
TEST(TreeDecodingTest, TrieRefusesDraftersOfLogits) {
  Method method;
  method.name = "m";
  method.drafter = std::make_unique<ModelDrafter>(TinyModel(2));
  method.tree_builder_name = "trie";
  method.drafter_name = "model";
  Options builder = *Options::FromString("{type: trie}", "test.yaml");
  method.tree_builder = *TreeBuilderRegistry::Create(builder, "tree builder");
  Options verifier = *Options::FromString("{type: point_mass}", "test.yaml");
  method.verifier = *VerifierRegistry::Create(verifier, "verifier");
  Options policy = *Options::FromString("{type: fixed}", "test.yaml");
  method.policy = *LengthPolicyRegistry::Create(policy, "length policy");
  EXPECT_THAT(std::string(method.CheckCompatible().message()),
              HasSubstr("tree builder 'trie' merges the token continuations of a token-only drafter, but drafter "
                        "'model' gives next-token logits"));
}

// A length policy a builder would ignore is refused, naming both, rather than
// silently doing nothing.
TEST(TreeDecodingTest, LengthPoliciesTheBuilderIgnoresAreRefused) {
  auto method = [](const std::string& builder, const std::string& policy) {
    Method m = ModelDrafterMethod(TinyModel(2), builder, Verifier("point_mass"), 3);
    Options spec = *Options::FromString(policy, "test.yaml");
    m.policy = *LengthPolicyRegistry::Create(spec, "length policy");
    m.policy_name = *spec.GetString("type");
    m.length_policy_configured = true;
    return m.CheckCompatible();
  };
  for (const std::string& builder : {kEagleTree, kDynamic, kSequoia, kBestFirst, kOptTree}) {
    EXPECT_THAT(std::string(method(builder, "{type: heuristic}").message()),
                HasSubstr("shapes its trees from its own options, so the length policy 'heuristic' would be ignored"))
        << builder;
  }
  EXPECT_TRUE(method("{type: best_first, budget: 12}", "{type: heuristic}").ok());
  EXPECT_TRUE(method("{type: opt_tree, nodes: 6}", "{type: heuristic}").ok());
  EXPECT_TRUE(method("{type: multi_sample, k: 2}", "{type: fixed, gamma: 3}").ok());
  Method unconfigured = ModelDrafterMethod(TinyModel(2), kEagleTree, Verifier("point_mass"), 3);
  EXPECT_TRUE(unconfigured.CheckCompatible().ok()) << "the default policy is no one's choice";
}

// The comparison configs list only combinations that run: every method is
// created with a tiny drafter, passes the load-time checks, and decodes at
// every temperature of its config (verifiers also refuse laws at Verify time).
// A policy whose trained head reads rows of the shipped pair's (its
// vocabulary's log-probabilities, its drafter's hidden states) gets a tiny
// target and drafter of that vocabulary, or a tiny drafter of that width.
TEST(TreeDecodingTest, ComparisonConfigsRunAtTheirTemperatures) {
  auto tiny_target = TinyModel(1);
  for (const char* name :
       {"tree_vs_chain.yaml", "tree_vs_chain_sampled.yaml", "length_policies.yaml", "adaptive_trees.yaml"}) {
    auto root = Options::FromFile(std::string(SPECLAB_SOURCE_DIR) + "/configs/experiments/" + name);
    ASSERT_TRUE(root.ok()) << root.status();
    Options decoding = *root->GetMap("decoding");
    const std::vector<double> temperatures = *decoding.GetDoubleList("temperatures");
    const int64_t top_k = *decoding.GetInt("top_k", 0);
    std::vector<Options> methods = *root->GetMapList("methods");
    for (Options& spec : methods) {
      const std::string method_name = *spec.GetString("name");
      auto plugin = [&](const std::string& key, const std::string& fallback) {
        return spec.Has(key) ? *spec.GetMap(key) : *Options::FromString("{type: " + fallback + "}", name);
      };
      Options builder = plugin("tree_builder", "chain"), verifier = plugin("verifier", "");
      Options policy = plugin("length_policy", "fixed");
      Method method;
      method.name = method_name;
      auto created_builder = TreeBuilderRegistry::Create(builder, "tree builder");
      auto created_verifier = VerifierRegistry::Create(verifier, "verifier");
      auto created_policy = LengthPolicyRegistry::Create(policy, "length policy");
      ASSERT_TRUE(created_builder.ok() && created_verifier.ok() && created_policy.ok())
          << name << " " << method_name << ": " << created_builder.status() << created_verifier.status()
          << created_policy.status();
      method.tree_builder = *std::move(created_builder);
      method.verifier = *std::move(created_verifier);
      method.policy = *std::move(created_policy);
      const DraftRow row = method.policy->draft_row();
      const int64_t vocab = row == DraftRow::kLogProbs ? method.policy->draft_row_width() : 0;
      std::unique_ptr<LlamaModel> own_target = vocab > 0 ? TinyModel(1, vocab) : nullptr;
      LlamaModel* target = vocab > 0 ? own_target.get() : tiny_target.get();
      method.drafter = std::make_unique<ModelDrafter>(
          vocab > 0                    ? TinyModel(2, vocab)
          : row == DraftRow::kHidden ? TinyModel(2, 16, 2, 30, 256, method.policy->draft_row_width())
                                       : TinyModel(2));
      ASSERT_TRUE(method.CheckCompatible().ok()) << name << " " << method_name << ": " << method.CheckCompatible();
      for (double temperature : temperatures) {
        DecodeOptions options = Decoding(temperature, 4, 0);
        options.sampling.top_k = top_k;
        auto out = GenerateSpeculative(*target, method, kPrompt, options);
        EXPECT_TRUE(out.ok()) << name << " " << method_name << " at T=" << temperature << ": " << out.status();
      }
    }
  }
}

// SPECLAB_TEST_DEVICE=cuda (scripts/gpu_run.sh) runs every builder on the
// GPU: device-side drafting (Gumbel keys, gathers, per-level reads) at T = 0
// against greedy decoding on the same device, and at T = 1 with the rules
// each builder is meant for.
TEST(TreeDecodingTest, EveryBuilderRunsOnTheTestDevice) {
  const c10::Device device = TestDevice();
  if (device.is_cuda() && !at::hasCUDA()) GTEST_SKIP() << "SPECLAB_TEST_DEVICE=cuda but no CUDA";
  auto target = TinyModelOn(device, 1);
  auto greedy = GenerateAutoregressive(*target, kPrompt, Decoding(0, 16, 0));
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  const std::vector<std::pair<std::string, std::vector<std::string>>> combinations = {
      {kEagleTree, {"point_mass"}},
      {kSampledTree, {"point_mass", "rrs_wor", "traversal"}},
      {kSequoia, {"rrs_wor"}},
      {kDynamic, {"point_mass"}},
      {kBestFirst, {"point_mass"}},
      {kOptTree, {"point_mass"}},
      {kMultiIid, {"specinfer", "spectr", "khisti"}},
      {kMultiWor, {"rrs_wor"}},
  };
  for (const auto& [builder, verifiers] : combinations) {
    for (const std::string& verifier : verifiers) {
      Method method = ModelDrafterMethod(TinyModelOn(device, 2), builder, Verifier(verifier), 3);
      for (double temperature : {0.0, 1.0}) {
        auto out = GenerateSpeculative(*target, method, kPrompt, Decoding(temperature, 16, 5));
        ASSERT_TRUE(out.ok()) << builder << " + " << verifier << " at T=" << temperature << ": " << out.status();
        if (temperature == 0) EXPECT_EQ(out->tokens, greedy->tokens) << builder << " + " << verifier;
        EXPECT_EQ(out->tokens.size(), 16u);
      }
    }
  }
}

// Pipelined chains on the test device (CUDA graphs for both models there):
// greedy decoding's tokens at T = 0 with every lossless chain rule's device
// form, and the step-by-step loop's tokens for the same seed at T = 1.
TEST(TreeDecodingTest, PipelinedChainsRunOnTheTestDevice) {
  const c10::Device device = TestDevice();
  if (device.is_cuda() && !at::hasCUDA()) GTEST_SKIP() << "SPECLAB_TEST_DEVICE=cuda but no CUDA";
  auto target = TinyModelOn(device, 1);
  target->EnableCudaGraphs(true);
  auto greedy = GenerateAutoregressive(*target, kPrompt, Decoding(0, 24, 0));
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  for (const std::string verifier : {"rejection", "block", "point_mass", "greedy"}) {
    for (double temperature : {0.0, 1.0}) {
      if (verifier == "greedy" && temperature > 0) continue;  // lossy there
      std::vector<int32_t> tokens[2];
      for (bool pipeline : {false, true}) {
        std::unique_ptr<LlamaModel> drafter = TinyModelOn(device, 2);
        drafter->EnableCudaGraphs(true);
        Method method = ModelDrafterMethod(std::move(drafter), "{type: chain}", Verifier(verifier), 3);
        ASSERT_NE(method.device_verifier, nullptr) << verifier;
        DecodeOptions options = Decoding(temperature, 24, 8);
        options.pipeline = pipeline;
        auto out = GenerateSpeculative(*target, method, kPrompt, options);
        ASSERT_TRUE(out.ok()) << verifier << " at T=" << temperature << ": " << out.status();
        EXPECT_EQ(out->draft_forwards.count(2), pipeline ? 1u : 0u) << verifier;
        tokens[pipeline] = out->tokens;
      }
      if (temperature == 0) EXPECT_EQ(tokens[1], greedy->tokens) << verifier;
      EXPECT_EQ(tokens[1], tokens[0]) << verifier << " at T=" << temperature;
    }
  }
}

// Pipelined trees grown on the device (framework/device/pipelined_tree.h):
// dynamic_topk's levels, best_first's free parents and opt_tree's levels
// with their stop (the graph skips the forwards past it), on the test device,
// with static shapes off (the models' defaults, which read each position
// back) and on (CUDA graphs on CUDA, their bodies eagerly on the CPU):
// greedy decoding's tokens at T = 0, and the step-by-step loop's tokens for
// the same seed at T = 1 (so the step-by-step loop's law, tested above).
TEST(TreeDecodingTest, PipelinedTreesDrawTheStepByStepTokens) {
  const c10::Device device = TestDevice();
  if (device.is_cuda() && !at::hasCUDA()) GTEST_SKIP() << "SPECLAB_TEST_DEVICE=cuda but no CUDA";
  for (const auto& [builder, nodes] : {std::pair{kDynamic, 15}, std::pair{kBestFirst, 12}, std::pair{kOptTree, 6}}) {
    for (bool static_shapes : {false, true}) {
      auto target = TinyModelOn(device, 1);
      target->EnableCudaGraphs(static_shapes);
      auto greedy = GenerateAutoregressive(*target, kPrompt, Decoding(0, 24, 0));
      ASSERT_TRUE(greedy.ok()) << greedy.status();
      for (double temperature : {0.0, 1.0}) {
        SCOPED_TRACE(absl::StrCat(builder, static_shapes ? " static" : " plain", " T=", temperature));
        Generation runs[2];
        for (bool pipeline : {false, true}) {
          std::unique_ptr<LlamaModel> drafter = TinyModelOn(device, 2);
          drafter->EnableCudaGraphs(static_shapes);
          Method method = ModelDrafterMethod(std::move(drafter), builder, Verifier("point_mass"), 3);
          ASSERT_NE(method.device_verifier, nullptr);
          DecodeOptions options = Decoding(temperature, 24, 8);
          options.pipeline = pipeline;
          auto out = GenerateSpeculative(*target, method, kPrompt, options);
          ASSERT_TRUE(out.ok()) << out.status();
          runs[pipeline] = *std::move(out);
        }
        // A pipelined step's first phase is the host queuing the next step.
        ASSERT_GT(runs[1].steps.front().draft_seconds, 0.0);
        for (const StepStats& step : runs[0].steps) ASSERT_GT(step.draft_seconds, 0.0);
        if (temperature == 0) EXPECT_EQ(runs[1].tokens, greedy->tokens);
        EXPECT_EQ(runs[1].tokens, runs[0].tokens);
        ASSERT_EQ(runs[1].steps.size(), runs[0].steps.size());
        for (size_t i = 0; i < runs[0].steps.size(); ++i) {
          EXPECT_EQ(runs[1].steps[i].accepted, runs[0].steps[i].accepted) << "step " << i;
          EXPECT_EQ(runs[1].steps[i].longest_path, runs[0].steps[i].longest_path) << "step " << i;
          EXPECT_EQ(runs[1].steps[i].tree_nodes, nodes) << "step " << i;
        }
        EXPECT_EQ(target->committed_length(), static_cast<int64_t>(kPrompt.size() + runs[1].tokens.size()) - 1);
      }
    }
  }
}

// Where the drafter's fixed prefix does not fit before the first root (a
// three-token prompt, depth 3: DraftLevelsAt is Unimplemented), the engine
// runs its step-by-step loop: the same tokens and forwards as with
// pipelining off, and every step has a drafting phase.
TEST(TreeDecodingTest, PipelinedTreesFallBackToStepsWhereThePrefixDoesNotFit) {
  const std::vector<int32_t> prompt = {1, 5, 3};
  auto target = TinyModel(1);
  Generation runs[2];
  for (bool pipeline : {false, true}) {
    Method method = ModelDrafterMethod(TinyModel(2), kDynamic, Verifier("point_mass"), 3);
    DecodeOptions options = Decoding(1, 16, 4);
    options.pipeline = pipeline;
    auto out = GenerateSpeculative(*target, method, prompt, options);
    ASSERT_TRUE(out.ok()) << out.status();
    runs[pipeline] = *std::move(out);
  }
  EXPECT_EQ(runs[1].tokens, runs[0].tokens);
  EXPECT_EQ(runs[1].target_forwards, runs[0].target_forwards);
  EXPECT_EQ(runs[1].draft_forwards, runs[0].draft_forwards);
  for (const StepStats& step : runs[1].steps) EXPECT_GT(step.draft_seconds, 0.0);
}

}  // namespace
}  // namespace speclab
