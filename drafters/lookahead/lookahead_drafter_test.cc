// Lookahead decoding: the Jacobi window's riders (where each stands, what it
// sees), its iterations and n-grams; the engine scoring the riders as the
// sequences they see, in the verification forward; decoding that equals
// greedy at T = 0 and keeps the target's law at T = 1; merge passing the
// riders along.
#include "drafters/lookahead/lookahead_drafter.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "framework/core/options.h"
#include "framework/device_transfer.h"
#include "framework/speculative_decoder.h"
#include "drafters/common/fixed_length.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/device_roots.h"
#include "tests/support/pipelined_agreement.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab::lookahead {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using Tokens = std::vector<int32_t>;

Tokens HostTokens(const at::Tensor& tokens) {
  const at::Tensor host = tokens.to(at::kCPU, at::kLong).contiguous();
  return Tokens(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}

TEST(JacobiWindowTest, EachRiderSeesTheTrajectoryThatEndsWithIt) {
  const JacobiWindow window(/*levels=*/2, /*width=*/3, {10, 11, 12, 20, 21, 22});
  const RiderTokens riders = window.Riders();
  EXPECT_THAT(riders.tokens, ElementsAre(10, 11, 12, 20, 21, 22));
  EXPECT_THAT(riders.offsets, ElementsAre(1, 2, 3, 2, 3, 4));
  ASSERT_TRUE(riders.Check("lookahead", 32).ok());
  auto row = [&](int i) { return Tokens(riders.sees.begin() + i * 6, riders.sees.begin() + (i + 1) * 6); };
  EXPECT_THAT(row(0), ElementsAre(1, 0, 0, 0, 0, 0));
  EXPECT_THAT(row(2), ElementsAre(1, 1, 1, 0, 0, 0));  // the first level: a causal chain
  EXPECT_THAT(row(3), ElementsAre(1, 0, 0, 1, 0, 0));  // 10 20: offsets 1, 2
  EXPECT_THAT(row(5), ElementsAre(1, 1, 1, 0, 0, 1));  // 10 11 12 22: offsets 1 .. 4
  EXPECT_EQ(window.last_level_begin(), 3);
}

TEST(JacobiWindowTest, AnIterationGivesEachColumnsNgramAndMovesTheWindowOn) {
  JacobiWindow window(/*levels=*/2, /*width=*/3, {10, 11, 12, 20, 21, 22});
  auto ngrams = window.Advance({30, 31, 32});
  ASSERT_TRUE(ngrams.ok()) << ngrams.status();
  ASSERT_EQ(ngrams->size(), 3u);
  EXPECT_EQ((*ngrams)[1].key, 11);
  EXPECT_THAT((*ngrams)[1].follower, ElementsAre(21, 31));
  EXPECT_THAT(window.Riders().tokens, ElementsAre(20, 21, 22, 30, 31, 32));
  EXPECT_EQ(window.iterations(), 1);
  EXPECT_THAT(std::string(window.Advance({1, 2}).status().message()), HasSubstr("2 new guesses for a window 3 wide"));
}

// The window before the step (a twin drafter of the same seed shows it) and
// after: its last level must hold the target's greedy tokens after each
// column's trajectory, computed here by plain causal forwards. Step by step
// (the host's window) and pipelined (the device form's). On CUDA where
// SPECLAB_TEST_DEVICE=cuda, as the next test.
TEST(LookaheadDrafterTest, TheVerificationForwardScoresTheRidersAsTheSequencesTheySee) {
  // Flat logits (a small scale) and many columns, so that a rider scored at
  // a wrong position or seeing the wrong tokens changes some guess.
  auto target = testing::TinyModelOn(testing::TestDevice(), 5, /*vocab=*/64, /*layers=*/2, /*logit_scale=*/2);
  const Tokens prompt = {1, 5, 3, 7, 2, 5, 3, 9, 4, 33, 60, 12, 41, 8};
  const std::string spec = "{type: lookahead, window: 12, level: 4, guess_set: 3}";
  auto spec_options = Options::FromString(spec, "test.yaml");
  ASSERT_TRUE(spec_options.ok());
  auto twin = DrafterRegistry::Create(*spec_options, "drafter", DrafterEnvironment{});
  ASSERT_TRUE(twin.ok()) << twin.status();
  ASSERT_TRUE((*twin)->Reset(prompt, {}).ok());
  const JacobiWindow before = dynamic_cast<LookaheadDrafter&>(**twin).window();
  const int levels = before.levels(), width = before.width();
  auto greedy = GenerateAutoregressive(*target, prompt, {.sampling = {.temperature = 0}, .max_new_tokens = 1});
  ASSERT_TRUE(greedy.ok());

  for (const bool pipeline : {false, true}) {
    auto method = testing::MethodFromYaml(
        absl::StrCat("{name: la, drafter: ", spec, ", tree_builder: {type: trie, budget: 9, max_candidates: 3}, "
                     "verifier: {type: greedy}}"),
        target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, prompt,
                                   {.sampling = {.temperature = 0}, .max_new_tokens = 1, .pipeline = pipeline});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(out->engine_form, HasSubstr(pipeline ? "pipelined tree" : "step by step"));
    const auto& drafter = dynamic_cast<LookaheadDrafter&>(*method->drafter);
    Tokens after = drafter.window().Riders().tokens;
    if (pipeline) {
      ASSERT_NE(drafter.device_state(), nullptr);
      after = drafter.device_state()->Window();
      EXPECT_EQ(drafter.window().iterations(), 0) << "the host's window stays as Reset left it";
    }
    auto at = [&](int level, int column) { return after[level * width + column]; };
    for (int j = 0; j + 1 < levels; ++j)
      for (int c = 0; c < width; ++c) EXPECT_EQ(at(j, c), before.at(j + 1, c)) << "level " << j;
    for (int c = 0; c < width; ++c) {
      std::vector<int64_t> sequence(prompt.begin(), prompt.end()), positions;
      for (int k = 0; k <= c; ++k) sequence.push_back(before.at(0, k));
      for (int j = 1; j < levels; ++j) sequence.push_back(before.at(j, c));
      for (size_t i = 0; i < sequence.size(); ++i) positions.push_back(static_cast<int64_t>(i));
      ASSERT_TRUE(target->Truncate(0).ok());
      auto logits = target->Forward(LongsToDevice(sequence, target->device()),
                                    LongsToDevice(positions, target->device()), at::Tensor());
      ASSERT_TRUE(logits.ok()) << logits.status();
      EXPECT_EQ(at(levels - 1, c), logits->select(0, -1).argmax().item<int64_t>()) << "column " << c;
    }
    // The tree's row was not disturbed: the one token emitted is greedy's.
    EXPECT_EQ(out->tokens, greedy->tokens) << "pipelined: " << pipeline;
  }
}

// A guess of the end-of-text token is pooled (its n-gram is the target's)
// but leaves the window, replaced by a token of the prompt, as in the
// authors' code.
TEST(LookaheadDrafterTest, AnEndOfTextGuessIsPooledButLeavesTheWindow) {
  constexpr int32_t kEos = 2;
  LookaheadDrafter drafter({.window = 3, .level = 2, .guess_set = 4}, /*seed=*/1, kEos);
  const Tokens prompt = {5, 6, 7, 5};
  ASSERT_TRUE(drafter.Reset(prompt, {}).ok());
  ASSERT_TRUE(drafter.BeginStep(prompt).ok());
  ASSERT_TRUE(drafter.Riders().ok());
  at::Tensor logits = at::zeros({3, 8});  // greedy guesses 4, EOS, 4
  logits[0][4] = 1;
  logits[1][kEos] = 1;
  logits[2][4] = 1;
  ASSERT_TRUE(drafter.RidersScored(logits).ok());
  const JacobiWindow before = drafter.window();
  ASSERT_TRUE(drafter.EndStep(TokenTree(prompt.back()), {0}, {}).ok());
  const JacobiWindow& after = drafter.window();
  EXPECT_EQ(after.at(0, 0), 4);
  EXPECT_EQ(after.at(0, 2), 4);
  EXPECT_THAT(after.at(0, 1), ::testing::AnyOf(5, 6, 7)) << "a prompt token stands in for EOS";
  EXPECT_THAT(drafter.pool().Followers({before.at(0, 1)}), ::testing::Contains(Tokens{kEos}));
}

const Tokens kPrompt = {1, 5, 3, 7, 2, 5, 3, 1, 5, 3, 7};

TEST(LookaheadDrafterTest, EqualsGreedyAtTemperatureZeroAndDraftsFromItsPool) {
  auto target = testing::TinyModelOn(testing::TestDevice(), 3, /*vocab=*/8);
  auto greedy = GenerateAutoregressive(*target, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 40});
  ASSERT_TRUE(greedy.ok());
  for (const char* builder : {"{type: chain}", "{type: trie, budget: 12, max_candidates: 4}"}) {
    for (const char* verifier : {"{type: greedy}", "{type: point_mass}"}) {
      auto method = testing::MethodFromYaml(
          absl::StrCat("{name: la, drafter: {type: lookahead, window: 5, level: 3, guess_set: 4}, tree_builder: ",
                       builder, ", verifier: ", verifier, ", length_policy: {type: fixed, gamma: 4}}"),
          target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      auto out = GenerateSpeculative(*target, *method, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 40});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->tokens, greedy->tokens) << builder << " " << verifier;
      int accepted = 0;
      for (const StepStats& step : out->steps) accepted += step.accepted;
      EXPECT_GE(accepted, 8) << builder << " " << verifier << ": the pool's n-grams were accepted";
      // Every forward carried the window: 2 levels x 5 riders beside the tree.
      for (const auto& [tokens, count] : out->target_forwards) EXPECT_GE(tokens, 11) << builder;
    }
  }
}

TEST(LookaheadDrafterTest, BranchingTreesKeepTheTargetsLawAtTemperatureOne) {
  constexpr int kRuns = 2000;
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const Tokens prompt = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};  // "3" followed by "5 4" and "6 1": a branching tree
  auto method = testing::MethodFromYaml(
      "{name: la, drafter: {type: lookahead, window: 3, level: 3, guess_set: 4, pool_from_prompt: true}, "
      "tree_builder: {type: trie, budget: 8, max_candidates: 4}, verifier: {type: point_mass}, "
      "length_policy: {type: fixed, gamma: 3}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const testing::TwoTokenSample sample = testing::SampleTwoTokens(*target, *method, prompt, kRuns, 1000);
  const testing::ChiSquareResult result =
      testing::ChiSquareTest(sample.counts, testing::ExactTwoTokenLaw(*target, prompt, 1.0), kRuns);
  EXPECT_LT(result.statistic, result.critical) << "dof " << result.degrees_of_freedom;
  EXPECT_GT(sample.branching, kRuns / 2) << "the trees branched";
  EXPECT_GT(sample.accepted, kRuns / 20) << "drafts were accepted";
}

TEST(LookaheadDrafterTest, MergePassesTheRidersAlong) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  const std::string lookahead = "{type: lookahead, window: 5, level: 3, guess_set: 4}";
  std::vector<int> accepted;
  for (const std::string& drafter : {lookahead, absl::StrCat("{type: merge, drafters: [", lookahead, "]}")}) {
    auto method = testing::MethodFromYaml(
        absl::StrCat("{name: la, drafter: ", drafter, ", tree_builder: {type: trie, budget: 12, max_candidates: 4}, "
                     "verifier: {type: greedy}, length_policy: {type: fixed, gamma: 4}}"),
        target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 40});
    ASSERT_TRUE(out.ok()) << out.status();
    accepted.emplace_back();
    for (const StepStats& step : out->steps) accepted.back() += step.accepted;
  }
  EXPECT_GT(accepted[0], 0);
  EXPECT_EQ(accepted[1], accepted[0]) << "merge drafts what its one drafter drafts";
}

// The device form against the host's rule, step after step: two drafters of
// one seed, one stepping on the host (BeginStep, Continuations, Riders,
// RidersScored, EndStep), one on the device (ContinuationsAt and
// ContinuationAt, RidersAt, RidersScoredAt), get the same random rider
// logits (often guessing EOS, often tied between two tokens, in a vocabulary
// small enough that keys repeat and full lists drop their least recent);
// their riders and drafts must agree at every step, and so must the pools
// and windows at the end. On CUDA where SPECLAB_TEST_DEVICE=cuda (the
// kernels).
TEST(LookaheadDrafterTest, TheDeviceFormDraftsAndIteratesAsTheHost) {
  constexpr int kVocab = 7;
  constexpr int32_t kEos = 2;
  const c10::Device device = testing::TestDevice();
  std::mt19937 random(5);
  int compared = 0;
  for (const bool from_prompt : {false, true}) {
    for (const auto& [window, level, guess_set] : {std::tuple{3, 3, 2}, std::tuple{5, 4, 3}, std::tuple{2, 2, 1}}) {
      const LookaheadOptions options{.window = window, .level = level, .guess_set = guess_set,
                                     .pool_from_prompt = from_prompt};
      const std::string where = absl::StrCat("W ", window, " N ", level, " G ", guess_set, " pool_from_prompt ",
                                             from_prompt);
      LookaheadDrafter host(options, /*seed=*/9, kEos, kVocab), on_device(options, /*seed=*/9, kEos, kVocab);
      Tokens sequence = {1, 3, 4, 1, 3, 5, 6, 1, 3};
      ASSERT_TRUE(host.Reset(sequence, {}).ok());
      ASSERT_TRUE(on_device.Reset(sequence, {}).ok());
      const int r = (level - 1) * window;
      for (int step = 0; step < 30; ++step) {
        const int32_t root = sequence.back();
        const std::string at = absl::StrCat(where, ", step ", step);
        ASSERT_TRUE(host.BeginStep(sequence).ok());
        auto expected = host.Continuations(TokenTree(root), 0, 3, 4);
        ASSERT_TRUE(expected.ok()) << expected.status();
        const DeviceRoot device_root = testing::RootOfSequence(sequence, device, /*stale=*/3, /*stale_token=*/6);
        auto got = on_device.ContinuationsAt(device_root, 3, 4);
        ASSERT_TRUE(got.ok()) << at << ": " << got.status();
        testing::ExpectContinuations(*got, *expected, root, at);
        auto chain = on_device.ContinuationAt(device_root, 4);
        auto host_chain = host.Continuation(TokenTree(root), 0, 4);
        ASSERT_TRUE(chain.ok() && host_chain.ok()) << chain.status();
        Tokens fixed = {root};
        for (int32_t token : ToFixedLength(*host_chain, 4, root)) fixed.push_back(token);
        EXPECT_EQ(HostTokens(*chain), fixed) << at;
        compared += static_cast<int>(expected->size());

        auto riders = host.Riders();
        auto device_riders = on_device.RidersAt();
        ASSERT_TRUE(riders.ok() && device_riders.ok()) << device_riders.status();
        ASSERT_EQ(device_riders->size(), r);
        EXPECT_EQ(HostTokens(device_riders->tokens), riders->tokens) << at;
        at::Tensor logits = at::rand({r, kVocab});
        for (int c = 0; c < window; ++c) {
          const int kind = random() % 3;
          if (kind == 0) logits[r - window + c][kEos] = 2;  // an EOS guess
          if (kind == 1) {  // a tie: the first of the maxima is the guess
            logits[r - window + c][1 + random() % 3] = 3;
            logits[r - window + c][4 + random() % 3] = 3;
          }
        }
        ASSERT_TRUE(host.RidersScored(logits).ok());
        ASSERT_TRUE(on_device.RidersScoredAt(logits.to(device)).ok());
        ASSERT_TRUE(host.EndStep(TokenTree(root), {0}, {}).ok());
        // The sequence moves on by a draft or two and a token.
        if (!expected->empty()) sequence.push_back(expected->front().front());
        sequence.push_back(static_cast<int32_t>(random() % kVocab));
      }
      ASSERT_NE(on_device.device_state(), nullptr);
      EXPECT_EQ(on_device.device_state()->Window(), host.window().Riders().tokens) << where;
      for (int32_t key = 0; key < kVocab; ++key)
        EXPECT_EQ(on_device.device_state()->Followers(key), host.pool().Followers({key})) << where << ", key " << key;
    }
  }
  EXPECT_GT(compared, 200) << "the pools drafted";
}

// Pipelined, the window rides the engine's forward and the drafts come from
// the device's pool. Where the pool learned the prompt, which holds every
// token of the vocabulary with its followers, every step drafts, and the
// steps must be step by step's: the same tokens and the same drafts accepted
// at every step, for a trie alone and merged. (Where the root has no
// n-gram, the device's trie verifies a copy of the root and its chain a
// filled one, which the host's drafts lack: there greedy's tokens, run twice.)
TEST(LookaheadDrafterTest, PipelinedStepsAreTheHostsSteps) {
  auto target = testing::TinyModelOn(testing::TestDevice(), 3, /*vocab=*/8);
  const Tokens every_token = {0, 1, 2, 3, 4, 5, 6, 7, 0, 2, 4, 6, 1, 3, 5, 7, 0, 1};
  const std::string lookahead = "{type: lookahead, window: 5, level: 3, guess_set: 4";
  const std::string learning = absl::StrCat(lookahead, ", pool_from_prompt: true}");
  auto method_of = [&](const std::string& drafter, const std::string& builder) {
    return testing::MethodFromYaml(absl::StrCat("{name: la, drafter: ", drafter, ", tree_builder: ", builder,
                                                ", verifier: {type: greedy}, length_policy: {type: fixed, gamma: 2}}"),
                                   target.get());
  };
  const std::string trie = "{type: trie, budget: 12, max_candidates: 4}";
  const std::string merged = absl::StrCat("{type: merge, drafters: [{type: prompt_lookup}, ", learning, "]}");
  for (const std::string& drafter : {learning, merged}) {
    auto method = method_of(drafter, trie);
    ASSERT_TRUE(method.ok()) << method.status();
    const testing::StepAgreement seen =
        testing::ExpectPipelinedAsStepByStep(*target, *method, every_token, 40, "pipelined tree");
    EXPECT_GT(seen.accepted, 8) << drafter;
    EXPECT_GT(seen.rejected, 0) << drafter;
  }
  for (const std::string& builder : {trie, std::string("{type: chain}")}) {
    auto method = method_of(absl::StrCat(lookahead, "}"), builder);
    ASSERT_TRUE(method.ok()) << method.status();
    const std::array<int, 2> accepted = testing::AcceptedInTwoRuns(*target, *method, kPrompt, 40, true, builder);
    EXPECT_GT(accepted[0], 4) << builder;
  }
}

TEST(LookaheadDrafterTest, OptionErrorsNameTheKey) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  auto create = [&](const std::string& drafter) {
    return std::string(
        testing::MethodFromYaml(absl::StrCat("{name: l, drafter: ", drafter, ", verifier: {type: greedy}}"),
                                target.get())
            .status()
            .message());
  };
  EXPECT_THAT(create("{type: lookahead, window: 0}"), HasSubstr("key 'drafter.window'"));
  EXPECT_THAT(create("{type: lookahead, level: 1}"), HasSubstr("key 'drafter.level'"));
  EXPECT_THAT(create("{type: lookahead, guess_set: 0}"), HasSubstr("key 'drafter.guess_set'"));
  EXPECT_THAT(create("{type: lookahead, pool_from_prompt: maybe}"), HasSubstr("key 'drafter.pool_from_prompt'"));
  EXPECT_THAT(create("{type: lookahead, size: 3}"), HasSubstr("unknown key 'drafter.size'"));
}

}  // namespace
}  // namespace speclab::lookahead
