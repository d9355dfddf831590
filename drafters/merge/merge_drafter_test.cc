// The merge drafter: candidates of several token-only drafters in one tree,
// in priority and interleaved order, on the host and on the device; greedy's
// tokens at T = 0 and the target's law at T = 1, pipelined and step by step;
// refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "drafters/merge/merge_device.h"
#include "framework/device/device_drafter.h"
#include "framework/device_transfer.h"
#include "framework/speculative_decoder.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/device_roots.h"
#include "tests/support/long_tensors.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;
using Tokens = std::vector<int32_t>;

absl::StatusOr<std::unique_ptr<Drafter>> MergeFromYaml(const std::string& yaml,
                                                       c10::Device device = c10::Device(c10::kCPU)) {
  Options spec = *Options::FromString(yaml, "m.yaml");
  return DrafterRegistry::Create(spec, "drafter", DrafterEnvironment{.device = device});
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

// ContinuationsAt on the test device: the parts' device candidates merged
// as Continuations() merges the host's (a fresh drafter each way, the
// sequence's first half as the prompt, so that the n-gram cache learns the
// rest on the device), in both orders.
TEST(MergeDrafterTest, ContinuationsAtMergeThePartsAsTheHost) {
  const c10::Device device = testing::TestDevice();
  at::Generator gen = at::detail::createCPUGenerator(3);
  int found = 0;
  for (const char* order : {"priority", "interleave"}) {
    const std::string yaml = absl::StrCat(
        "{type: merge, order: ", order, ", drafters: [{type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 3}, ",
        "{type: ngram_cache, leader: 1, follower: 2}, {type: prompt_lookup, max_ngram_size: 1, num_pred_tokens: 5}]}");
    for (int vocab : {3, 6, 40}) {
      for (int64_t length : {4, 9, 200}) {
        const at::Tensor random = at::randint(vocab, {length}, gen, at::TensorOptions().dtype(at::kLong));
        const Tokens sequence(random.data_ptr<int64_t>(), random.data_ptr<int64_t>() + length);
        const Tokens prompt(sequence.begin(), sequence.begin() + length / 2);
        for (auto [max_tokens, max_candidates] : {std::pair{3, 4}, std::pair{6, 16}}) {
          auto host = MergeFromYaml(yaml);
          auto on_device = MergeFromYaml(yaml, device);
          ASSERT_TRUE(host.ok() && on_device.ok());
          ASSERT_TRUE((*host)->Reset(prompt, {}).ok() && (*host)->BeginStep(sequence).ok());
          auto expected = (*host)->Continuations(TokenTree(sequence.back()), 0, max_tokens, max_candidates);
          ASSERT_TRUE(expected.ok()) << expected.status();
          ASSERT_TRUE((*on_device)->Reset(prompt, {}).ok());
          auto got = DeviceFormOf(**on_device)
                         ->ContinuationsAt(testing::RootOfSequence(sequence, device), max_tokens, max_candidates);
          ASSERT_TRUE(got.ok()) << got.status();
          testing::ExpectContinuations(*got, *expected, sequence.back(),
                                       absl::StrCat(order, ", vocab ", vocab, ", sequence of ", length, ", ",
                                                    max_candidates, " of ", max_tokens));
          found += static_cast<int>(expected->size());
        }
      }
    }
  }
  EXPECT_GT(found, 100);
}

// The device form against the host's rule on random parts: candidates over
// three tokens (so that parts repeat one another), empty ones among them,
// both orders, caps below and above what the parts give.
TEST(MergeDrafterTest, MergeOnDeviceIsMergeInOrder) {
  const c10::Device device = testing::TestDevice();
  std::mt19937 rng(9);
  int merged = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int parts = 1 + trial % 3, per_part = 1 + static_cast<int>(rng() % 6), width = 1 + trial % 4;
    std::vector<merge::Candidates> each(parts);
    std::vector<DeviceContinuations> on_device;
    for (merge::Candidates& candidates : each) {
      candidates.resize(rng() % (per_part + 1));  // fewer than the rows: the rest empty
      for (auto& candidate : candidates) {
        candidate.resize(rng() % (width + 1));
        for (int32_t& t : candidate) t = static_cast<int32_t>(rng() % 3);
      }
      on_device.push_back(ToDeviceContinuations(candidates, per_part, width, 7, device));
    }
    for (bool interleave : {false, true}) {
      for (int max_candidates : {1, 4, 64}) {
        // The host's rule takes the parts' rows as the device does: empty past the last candidate.
        std::vector<merge::Candidates> rows = each;
        for (merge::Candidates& part_rows : rows) part_rows.resize(per_part);
        const merge::Candidates expected = merge::MergeInOrder(rows, interleave, max_candidates);
        auto got = merge::MergeOnDevice(on_device, interleave, max_candidates, testing::LongTensor({7}, device));
        ASSERT_TRUE(got.ok()) << got.status();
        testing::ExpectContinuations(*got, expected, 7,
                                     absl::StrCat("trial ", trial, ", interleave ", interleave, ", ", max_candidates));
        merged += static_cast<int>(expected.size());
      }
    }
  }
  EXPECT_GT(merged, 200);
}

// Merged tries of parts with device forms (every token-only drafter's) run
// pipelined: greedy's tokens at T = 0 and the target's law at T = 1,
// pipelined and step by step.
TEST(MergeDrafterTest, PipelinedTriesEqualGreedyAndKeepTheLaw) {
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const Tokens prompt = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};
  auto greedy = GenerateAutoregressive(*target, prompt, {.sampling = {.temperature = 0}, .max_new_tokens = 20});
  ASSERT_TRUE(greedy.ok());
  auto spec = [](const char* second) {
    return absl::StrCat("{name: merged, drafter: {type: merge, order: interleave, drafters: [{type: prompt_lookup, "
                        "max_ngram_size: 2, num_pred_tokens: 3}, ", second, "]}, tree_builder: {type: trie, budget: 8, "
                        "max_candidates: 8}, verifier: {type: point_mass}, length_policy: {type: fixed, gamma: 3}}");
  };
  for (auto [second, form] : {std::pair{"{type: ngram_cache, leader: 1, follower: 2, transient: true}",
                                        "pipelined tree"},
                              std::pair{"{type: suffix_tree}", "pipelined tree"},
                              std::pair{"{type: hierarchy}", "pipelined tree"},
                              std::pair{"{type: lookahead, window: 3, level: 3, guess_set: 3}",
                                        "pipelined tree"}}) {
    auto method = testing::MethodFromYaml(spec(second), target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, prompt,
                                   {.sampling = {.temperature = 0}, .max_new_tokens = 20, .pipeline = true});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << second;
    EXPECT_THAT(out->engine_form, HasSubstr(form));
  }
  auto method = testing::MethodFromYaml(spec("{type: ngram_cache, leader: 1, follower: 2, transient: true}"),
                                        target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, prompt, testing::ExactTwoTokenLaw(*target, prompt, 1.0),
                                              2000, "merged trie");
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
