// part_chains: a branch per part of a merge of drafters of logits, each node
// carrying the q row of the drafter that drew it; the target's law at T = 1
// under specinfer and point_mass (one part reading the target's features,
// so that merge hands each part its own); greedy's tokens at T = 0; and the
// refusals when the method is loaded.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/options.h"
#include "framework/sampling.h"
#include "framework/speculative_decoder.h"
#include "tests/support/pipelined_agreement.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;

const std::vector<int32_t> kPrompt = {1, 5, 3, 7, 2, 5};
constexpr char kFirst[] = "{type: layer_skip, exit_layer: 1}";
constexpr char kSecond[] = "{type: layer_skip, exit_layer: 2}";

std::string Merged(const std::string& second = kSecond) {
  return absl::StrCat("{type: merge, drafters: [", kFirst, ", ", second, "]}");
}

std::string Method(const std::string& drafter, const std::string& verifier, int gamma) {
  return absl::StrCat("{name: m, drafter: ", drafter, ", tree_builder: {type: part_chains}, verifier: ", verifier,
                      ", length_policy: {type: fixed, gamma: ", gamma, "}}");
}

// Drafter `spec`'s own q at T = 1 after `context` (the root its last token),
// drafting alone; undefined after a failure.
at::Tensor RowAlone(const char* spec, LanguageModel& target, const std::vector<int32_t>& context) {
  auto options = Options::FromString(spec, "test.yaml");
  if (!options.ok()) {
    ADD_FAILURE() << options.status();
    return at::Tensor();
  }
  auto alone = DrafterRegistry::Create(*options, "drafter", DrafterEnvironment{.target = &target});
  if (!alone.ok() || !(*alone)->Reset(context, {}).ok() || !(*alone)->BeginStep(context).ok()) {
    ADD_FAILURE() << spec << " could not start: " << alone.status();
    return at::Tensor();
  }
  auto logits = (*alone)->NextTokenLogits(TokenTree(context.back()), {0});
  if (!logits.ok()) {
    ADD_FAILURE() << logits.status();
    return at::Tensor();
  }
  return Probabilities(*logits, {.temperature = 1})[0];
}

TEST(PartChainsTest, EachBranchIsDrawnFromItsOwnDrafter) {
  auto target = testing::TinyModel(2, /*vocab=*/8, /*layers=*/3);
  auto method = testing::MethodFromYaml(Method(Merged(), "{type: specinfer}", 3), target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const SamplingParams sampling{.temperature = 1};
  at::Generator generator = MakeGenerator(target->device(), 7);
  ASSERT_TRUE(method->drafter->Reset(kPrompt, {}).ok());
  ASSERT_TRUE(method->drafter->BeginStep(kPrompt).ok());
  auto draft = method->tree_builder->Build(
      *method->drafter, {.root_token = kPrompt.back(), .sampling = sampling, .policy = method->policy.get(),
                         .generator = &generator, .device = target->device()});
  ASSERT_TRUE(draft.ok()) << draft.status();
  const TokenTree& tree = draft->tree;
  ASSERT_EQ(tree.size(), 7);  // two branches of three
  EXPECT_EQ(tree.children(0).size(), 2u);
  EXPECT_EQ(tree.max_depth(), 3);
  EXPECT_EQ(draft->sampling, DraftSampling::kIndependent);
  ASSERT_EQ(draft->tokens.size(0), 7);
  ASSERT_EQ(draft->draft_probs.size(0), 7);
  // Each branch's first row is its drafter's own q after the root, computed alone.
  for (int part = 0; part < 2; ++part) {
    const int first = tree.children(0)[part];
    EXPECT_TRUE(at::allclose(draft->draft_probs[first], RowAlone(part == 0 ? kFirst : kSecond, *target, kPrompt)))
        << "part " << part;
    const double q = draft->draft_probs[first][draft->tokens[first].item<int64_t>()].item<double>();
    EXPECT_GT(q, 0) << "the token was drawn from its row";
  }
  const std::vector<int>& top = tree.children(0);
  EXPECT_FALSE(at::allclose(draft->draft_probs[top[0]], draft->draft_probs[top[1]])) << "the two drafters differ";

  // A second step after the first branch's first two drafts and an extra
  // token were accepted: each part's q at the new root is its own drafter's
  // after the committed text (merge shows each part its branch, and the
  // accepted path where it lies in another: the second part must not take
  // the first branch's nodes 1 and 2 for its own). The rows differ from a
  // fresh drafter's only by the order of float32 additions (a prefill of the
  // whole text against a prefill, a chain and a commit): under 1e-8 here,
  // where the second part fed the first branch's nodes as its own moves its
  // row by 0.013.
  TokenTree verified = tree;
  const at::Tensor host_tokens = draft->tokens.to(at::kCPU);
  for (int node = 1; node < verified.size(); ++node) verified.set_token(node, host_tokens[node].item<int64_t>());
  const int second = top[0], third = verified.children(second)[0];
  std::vector<int32_t> committed = kPrompt;
  committed.push_back(verified.token(second));
  committed.push_back(verified.token(third));
  committed.push_back(3);  // the extra token
  ASSERT_TRUE(method->drafter->EndStep(verified, {0, second, third}, {}).ok());
  ASSERT_TRUE(method->drafter->BeginStep(committed).ok());
  auto next = method->tree_builder->Build(
      *method->drafter, {.root_token = committed.back(), .sampling = sampling, .policy = method->policy.get(),
                         .generator = &generator, .device = target->device()});
  ASSERT_TRUE(next.ok()) << next.status();
  for (int part = 0; part < 2; ++part) {
    const at::Tensor want = RowAlone(part == 0 ? kFirst : kSecond, *target, committed);
    const at::Tensor got = next->draft_probs[next->tree.children(0)[part]];
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-4) << "part " << part << " after step 2";
  }
}

TEST(PartChainsTest, SpecInferAndPointMassKeepTheTargetsLawAtTemperatureOne) {
  constexpr int kRuns = 2000;
  auto target = testing::TinyModel(4, /*vocab=*/8, /*layers=*/3, /*logit_scale=*/8);
  // Medusa's heads read the target's last hidden state: merge hands the second part its features.
  for (const char* verifier : {"{type: specinfer}", "{type: point_mass}"}) {
    auto method = testing::MethodFromYaml(Method(Merged("{type: medusa, heads: 2}"), verifier, 2), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    const testing::TwoTokenSample sample = testing::SampleTwoTokens(*target, *method, kPrompt, kRuns, 1000);
    const testing::ChiSquareResult result =
        testing::ChiSquareTest(sample.counts, testing::ExactTwoTokenLaw(*target, kPrompt, 1.0), kRuns);
    EXPECT_LT(result.statistic, result.critical) << verifier << ", dof " << result.degrees_of_freedom;
    EXPECT_GE(sample.branching, kRuns) << "every step's tree has a branch per drafter";
    EXPECT_GT(sample.accepted, kRuns / 10) << verifier << ": drafts were accepted";
  }
}

TEST(PartChainsTest, EqualsGreedyAtTemperatureZero) {
  auto target = testing::TinyModel(3, /*vocab=*/16, /*layers=*/3);
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 24};
  auto greedy = GenerateAutoregressive(*target, kPrompt, options);
  ASSERT_TRUE(greedy.ok());
  for (const char* verifier : {"{type: specinfer}", "{type: point_mass}", "{type: greedy}"}) {
    auto method = testing::MethodFromYaml(Method(Merged(), verifier, 3), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, kPrompt, options);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << verifier;
    EXPECT_THAT(out->engine_form, HasSubstr("pipelined tree"));
  }
}

// Pipelined, every part drafts its branch from the device's root, feeding
// again the tokens its cache may lack (another part's accepted branch): the
// same tokens and the same drafts accepted at every step as step by step at
// T = 0 (two early exits, and an early exit beside EAGLE's head, which reads
// the target's features); and the target's law at T = 1 under specinfer both
// ways. Two parts reading the target's features keep the steps on the host.
// (Whether a part's cache is fed again is ModelDrafterTest's: these tiny
// targets' greedy drafts hardly depend on the slots it would leave stale.)
TEST(PartChainsTest, PipelinedStepsAreTheHostsSteps) {
  auto target = testing::TinyModel(3, /*vocab=*/16, /*layers=*/3);
  for (const std::string& second : {std::string(kSecond), std::string("{type: eagle}")}) {
    for (const int gamma : {2, 3}) {
      auto method = testing::MethodFromYaml(Method(Merged(second), "{type: greedy}", gamma), target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      const testing::StepAgreement seen =
          testing::ExpectPipelinedAsStepByStep(*target, *method, kPrompt, 40, "pipelined tree");
      EXPECT_GT(seen.accepted, 10) << second << ", gamma " << gamma;
      EXPECT_GT(seen.rejected, 0) << second << ", gamma " << gamma;
    }
  }
  auto law_target = testing::TinyModel(4, /*vocab=*/8, /*layers=*/3, /*logit_scale=*/8);
  auto method = testing::MethodFromYaml(Method(Merged(), "{type: specinfer}", 2), law_target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  testing::ExpectTheLawPipelinedAndStepByStep(*law_target, *method, kPrompt,
                                              testing::ExactTwoTokenLaw(*law_target, kPrompt, 1.0), 2000,
                                              "part_chains, specinfer");
  auto reading = testing::MethodFromYaml(
      Method("{type: merge, drafters: [{type: medusa, heads: 2}, {type: eagle}]}", "{type: specinfer}", 2),
      law_target.get());
  ASSERT_TRUE(reading.ok()) << reading.status();
  auto out = GenerateSpeculative(*law_target, *reading, kPrompt, {.sampling = {.temperature = 1}, .max_new_tokens = 8});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->engine_form, HasSubstr("several parts read the target's features"));
}

// A run prices each drafter's forwards at its own model's costs: the
// generation counts them per model (Drafter::models()' order), summing to
// the drafters' total.
TEST(PartChainsTest, EachDraftersForwardsAreCountedApart) {
  auto target = testing::TinyModel(3, /*vocab=*/16, /*layers=*/3);
  auto method = testing::MethodFromYaml(Method(Merged(), "{type: specinfer}", 3), target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const size_t models = method->drafter->models().size();
  ASSERT_EQ(models, 2u);
  auto out = GenerateSpeculative(*target, *method, kPrompt, {.sampling = {.temperature = 1}, .max_new_tokens = 12});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->draft_forwards_by_model.size(), models);
  std::map<int64_t, int64_t> sum;
  for (const auto& counts : out->draft_forwards_by_model) {
    EXPECT_FALSE(counts.empty());
    for (const auto& [tokens, count] : counts) sum[tokens] += count;
  }
  EXPECT_EQ(sum, out->draft_forwards);
}

TEST(PartChainsTest, RefusalsNameTheBuilderAndTheRule) {
  auto target = testing::TinyModel(3, /*vocab=*/8, /*layers=*/3);
  auto message = [&](const std::string& yaml) {
    return std::string(testing::MethodFromYaml(yaml, target.get()).status().message());
  };
  EXPECT_THAT(message(absl::StrCat("{name: m, drafter: ", Merged(), ", verifier: {type: rejection}}")),
              HasSubstr("drafter 'merge' holds 2 drafters of logits, each with its own q, which tree builder 'chain' "
                        "would not tell apart: draft a branch per drafter with the tree builder 'part_chains'"));
  for (const char* rule : {"rrs", "spectr", "khisti", "traversal", "rrs_wor"})
    EXPECT_THAT(message(Method(Merged(), absl::StrCat("{type: ", rule, "}"), 2)),
                HasSubstr(absl::StrCat("verifier '", rule, "' tries siblings against one q row they share")));
  EXPECT_THAT(message(Method("{type: prompt_lookup}", "{type: point_mass}", 2)), HasSubstr("gives tokens only"));
}

}  // namespace
}  // namespace speclab
