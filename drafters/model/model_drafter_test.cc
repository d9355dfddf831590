// The model drafter with a vocabulary of its own, mapped onto the target's.
#include "drafters/model/model_drafter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/file_util.h"
#include "framework/device_transfer.h"
#include "framework/sampling.h"
#include "framework/speculative_decoder.h"
#include "tests/support/float_tolerance.h"
#include "tests/support/host_only_drafter.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using ::speclab::testing::MethodFromYaml;
using ::speclab::testing::ModelDrafterMethod;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

class VocabularyMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test process: ctest runs these tests in parallel.
    dir_ = ::testing::TempDir() + "/vocab_map_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    RemoveTree(dir_);
    target_ = TinyModel(1, /*vocab=*/16);
    // A drafter with 20 tokens: ids 0..15 are a permutation of the target's,
    // 16..19 have no target counterpart.
    ASSERT_TRUE(TinyModel(2, /*vocab=*/20)->Save(dir_ + "/drafter", at::kFloat).ok());
    std::ofstream map(dir_ + "/map.yaml");
    map << "d2t: [";
    for (int d = 0; d < 20; ++d) map << (d ? ", " : "") << (d < 16 ? (d * 7) % 16 : -1);
    map << "]\nunknown: 19\n";
  }
  void TearDown() override { RemoveTree(dir_); }

  std::string Method(const std::string& extra) {
    return "{name: m, drafter: {type: model, path: " + dir_ + "/drafter" + extra +
           "}, verifier: {type: rejection}, length_policy: {type: fixed, gamma: 3}}";
  }

  std::string dir_;
  std::unique_ptr<LlamaModel> target_;
};

TEST(ModelDrafterTest, DraftChainDraftsWhatTokenByTokenDraftingDoes) {
  // Three ways to draft the same chains: token by token, ForwardChain's
  // default (one Forward() per token) and its chain body (eager on the CPU;
  // the CUDA graph's code). At temperature 0 all must draft, accept and emit
  // the same tokens, through fully accepted steps (pending context) too; at
  // temperature 1 the two chain paths draw the same noise.
  auto target = TinyModel(1);
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3};
  for (auto [drafter_seed, temperature] : {std::pair{1, 0.0}, {2, 0.0}, {2, 1.0}}) {
    SCOPED_TRACE(absl::StrCat("drafter ", drafter_seed, ", temperature ", temperature));
    DecodeOptions options{.sampling = {.temperature = temperature}, .max_new_tokens = 40, .seed = 3,
                          .time_phases = false};
    std::vector<Generation> runs;
    for (int way = 0; way < 3; ++way) {
      // Seed 1 is the target itself with another logit scale: the same argmax,
      // every draft accepted at temperature 0, so every step leaves context pending.
      std::unique_ptr<LlamaModel> drafter = TinyModel(drafter_seed, 16, 2, drafter_seed == 1 ? 20 : 30);
      drafter->EnableCudaGraphs(way == 2);
      Method method = ModelDrafterMethod(std::move(drafter), "{type: chain}", "{type: rejection}", 4);
      if (way == 0) method.drafter = std::make_unique<testing::HostOnlyDrafter>(std::move(method.drafter));  // token by token
      auto out = GenerateSpeculative(*target, method, prompt, options);
      ASSERT_TRUE(out.ok()) << out.status();
      runs.push_back(*std::move(out));
    }
    int fully_accepted = 0, partly_accepted = 0;
    for (const StepStats& s : runs[1].steps) (s.accepted == 4 ? fully_accepted : partly_accepted) += 1;
    if (drafter_seed == 1) {
      EXPECT_EQ(partly_accepted, 0);
      EXPECT_GT(fully_accepted, 0) << "no step left pending context";
    } else {
      EXPECT_GT(partly_accepted, 0);
    }
    if (temperature == 0) {
      for (int way : {1, 2}) {
        EXPECT_EQ(runs[way].tokens, runs[0].tokens) << "way " << way;
        ASSERT_EQ(runs[way].steps.size(), runs[0].steps.size()) << "way " << way;
        for (size_t i = 0; i < runs[0].steps.size(); ++i)
          EXPECT_EQ(runs[way].steps[i].accepted, runs[0].steps[i].accepted) << "way " << way << " step " << i;
      }
    } else {
      EXPECT_EQ(runs[2].tokens, runs[1].tokens);
    }
  }
}

TEST(ModelDrafterTest, StepByStepDraftingAfterDeviceRootedChainsStartsOver) {
  // After DraftChainAt only the device knows what the cache holds (here the
  // chain overwrote slot 5 with another token): a later BeginStep must not
  // trust the host's record of it, and drafts as a fresh drafter does.
  const std::vector<int32_t> context = {1, 5, 3, 7, 2, 5, 3};
  ModelDrafter used(TinyModel(2)), fresh(TinyModel(2));
  ASSERT_TRUE(used.Reset(context, {}).ok());
  const c10::Device cpu(c10::kCPU);
  const DeviceRoot root{.last_two = LongsToDevice({9, 9}, cpu),
                        .position = {.start = LongsToDevice({5}, cpu), .max_start = 5}};
  const ChainPick greedy = ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
    return std::make_pair(GreedyTokens(logits), at::Tensor());
  });
  auto chain = used.DraftChainAt(root, 3, greedy);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->tokens.size(0), 4);  // the root, then three drafts
  std::vector<int32_t> longer = context;
  longer.push_back(4);
  ASSERT_TRUE(fresh.Reset(context, {}).ok());
  for (ModelDrafter* drafter : {&used, &fresh}) ASSERT_TRUE(drafter->BeginStep(longer).ok());
  const TokenTree tree(4);
  auto after_chain = used.NextTokenLogits(tree, {0}, at::Tensor());
  auto expected = fresh.NextTokenLogits(tree, {0}, at::Tensor());
  ASSERT_TRUE(after_chain.ok() && expected.ok());
  // Two float32 forwards of one model: within the first-order bound of its
  // reductions.
  const LanguageModel& model = *fresh.models()[0];
  const double tolerance =
      testing::ForwardTolerance(model.config(), model.capacity(), testing::UnitRoundoff(at::kFloat));
  EXPECT_LE((*after_chain - *expected).abs().max().item<double>(), tolerance * expected->abs().max().item<double>());
}

// A part of a part_chains tree whose cache holds its own chain after the
// root, where the step accepted another part's branch: with
// DeviceRoot::refeed it drafts, rows and all, what a drafter that saw the
// accepted tokens drafts; without, its stale slot shows in its rows.
TEST(ModelDrafterTest, DraftChainAtFeedsAgainWhatItsCacheMayLack) {
  const std::vector<int32_t> context = {1, 5, 3, 7, 2, 5, 3};  // the root 3 at position 6
  const c10::Device cpu(c10::kCPU);
  const ChainPick keep_logits = ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
    return std::make_pair(GreedyTokens(logits), logits.clone());
  });
  auto padded = [&](std::vector<int32_t> tokens) {
    tokens.resize(32, 0);
    return LongsToDevice(std::vector<int64_t>(tokens.begin(), tokens.end()), cpu);
  };
  auto root_at = [&](const std::vector<int32_t>& sequence, int refeed) {
    const int64_t start = static_cast<int64_t>(sequence.size()) - 2;  // the token before the root
    return DeviceRoot{.last_two = LongsToDevice({sequence[start], sequence[start + 1]}, cpu),
                      .position = {.start = LongsToDevice({start}, cpu), .max_start = start, .min_start = start},
                      .context = padded(sequence),
                      .refeed = refeed};
  };
  std::vector<at::Tensor> rows;  // refeed 1 (the accepted tokens less the last, fed with the root anyway), then 0
  std::vector<int32_t> accepted;
  for (const int refeed : {1, 0}) {
    ModelDrafter used(TinyModel(2));
    ASSERT_TRUE(used.Reset(context, {}).ok());
    auto own = used.DraftChainAt(root_at(context, 0), 3, keep_logits);  // its drafts fill slots 7 and 8
    ASSERT_TRUE(own.ok()) << own.status();
    // Another branch accepted: two tokens unlike its drafts, then the extra token.
    const int32_t first_draft = static_cast<int32_t>(own->tokens[1].item<int64_t>());
    accepted = context;
    for (int32_t token : {(first_draft + 1) % 16, (first_draft + 2) % 16, 4}) accepted.push_back(token);
    auto next = used.DraftChainAt(root_at(accepted, refeed), 3, keep_logits);
    ASSERT_TRUE(next.ok()) << next.status();
    rows.push_back(next->rows);
  }
  ModelDrafter fresh(TinyModel(2));
  ASSERT_TRUE(fresh.Reset(accepted, {}).ok());  // its cache holds every token before the last two
  auto expected = fresh.DraftChainAt(root_at(accepted, 0), 3, keep_logits);
  ASSERT_TRUE(expected.ok()) << expected.status();
  // Float32 forwards of one model, with prefixes of two lengths: within the
  // first-order bound of their reductions.
  const LanguageModel& model = *fresh.models()[0];
  const double bound = testing::ForwardTolerance(model.config(), model.capacity(), testing::UnitRoundoff(at::kFloat)) *
                       expected->rows.abs().max().item<double>();
  EXPECT_LE((rows[0] - expected->rows).abs().max().item<double>(), bound) << "fed again";
  EXPECT_GT((rows[1] - expected->rows).abs().max().item<double>(), 100 * bound) << "the stale slot is seen";
}

TEST_F(VocabularyMapTest, MappedDrafterIsExactAtTemperatureZero) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2};
  DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 30, .time_phases = false};
  auto greedy = GenerateAutoregressive(*target_, prompt, options);
  auto method = MethodFromYaml(Method(", vocab_map: " + dir_ + "/map.yaml"), target_.get());
  ASSERT_TRUE(method.ok()) << method.status();
  auto out = GenerateSpeculative(*target_, *method, prompt, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens);
}

TEST_F(VocabularyMapTest, MappedDrafterGrowsDynamicTreesExactlyAtTemperatureZero) {
  // DraftLevels maps every level's pick between the vocabularies.
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2};
  DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 30, .time_phases = false};
  auto greedy = GenerateAutoregressive(*target_, prompt, options);
  auto method = MethodFromYaml("{name: m, drafter: {type: model, path: " + dir_ + "/drafter, vocab_map: " + dir_ +
                                   "/map.yaml}, tree_builder: {type: dynamic_topk, top_k: 3, depth: 2, "
                                   "total_tokens: 8}, verifier: {type: point_mass}}",
                               target_.get());
  ASSERT_TRUE(method.ok()) << method.status();
  auto out = GenerateSpeculative(*target_, *method, prompt, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens);
}

TEST(ModelDrafterTest, DraftLevelsFeedsOnePrefixLength) {
  // Whatever a step accepted, the levels' prefix is depth + 2 tokens (cached
  // context re-fed), so that one graph serves every step: the drafter's
  // forwards are that prefix and the levels' top_k-wide forwards only, step
  // by step (DraftLevels) and pipelined (DraftLevelsAt, which drafts one
  // step queued past the end).
  for (bool pipeline : {false, true}) {
    SCOPED_TRACE(pipeline ? "pipelined" : "step by step");
    auto target = TinyModel(1);
    Method method = ModelDrafterMethod(TinyModel(1), "{type: dynamic_topk, top_k: 2, depth: 3, total_tokens: 7}",
                                       "{type: point_mass}", 3);
    DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 24, .time_phases = false,
                          .pipeline = pipeline};
    auto out = GenerateSpeculative(*target, method, {1, 5, 3, 7, 2, 4}, options);
    ASSERT_TRUE(out.ok()) << out.status();
    int accepted = 0;
    for (const StepStats& step : out->steps) accepted += step.accepted;
    EXPECT_GT(accepted, 0) << "drafted by the target itself, some steps must accept";
    const int64_t steps = static_cast<int64_t>(out->steps.size());
    const int64_t drafted = out->draft_forwards.count(5) ? out->draft_forwards.at(5) : 0;
    EXPECT_EQ(drafted, pipeline ? steps + 1 : steps);
    EXPECT_EQ(out->draft_forwards, (std::map<int64_t, int64_t>{{2, 3 * drafted}, {5, drafted}}));
  }
}

TEST(ModelDrafterTest, DraftLevelsAtNeedsRoomForItsPrefix) {
  // The fixed prefix of depth + 2 tokens must fit before the root: where the
  // host cannot rule out an earlier root, Unimplemented (the engine then
  // steps on the host), and nothing is fed.
  ModelDrafter drafter(TinyModel(1));
  ASSERT_TRUE(drafter.Reset({1, 5, 3, 7}, {}).ok());
  const c10::Device device = drafter.model().device();
  const at::Tensor context = LongsToDevice({1, 5, 3, 7, 0, 0, 0, 0}, device);
  const LevelPick pick = LevelPick::Of(
      1, [](const std::tuple<>&, int64_t, const at::Tensor&, const std::vector<at::Tensor>&) { return LevelPick::Choice{}; });
  const DeviceRoot root{.last_two = LongsToDevice({3, 7}, device),
                        .position = {.start = LongsToDevice({2}, device), .max_start = 2, .min_start = 2},
                        .context = context};
  auto early = drafter.DraftLevelsAt(root, 3, pick);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kUnimplemented) << early.status();
  EXPECT_EQ(drafter.model().forward_counts().size(), 1u);  // Reset's prefill only
  DeviceRoot short_context = root;
  short_context.context = context.narrow(0, 0, 3);
  EXPECT_EQ(drafter.DraftLevelsAt(short_context, 2, pick).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(VocabularyMapTest, DifferentVocabulariesWithoutAMapAreRefused) {
  auto method = MethodFromYaml(Method(""), target_.get());
  ASSERT_FALSE(method.ok());
  EXPECT_THAT(method.status().message(), HasSubstr("drafter vocabulary (20 tokens) differs from the target's (16)"));
  EXPECT_THAT(method.status().message(), HasSubstr("vocab_map"));
}

TEST_F(VocabularyMapTest, SameSizeButOtherSpecialIdsIsAnotherTokenizer) {
  const std::string other = dir_ + "/other_tokenizer";
  ASSERT_TRUE(TinyModel(2, /*vocab=*/16)->Save(other, at::kFloat).ok());
  auto config = ModelConfig::FromJsonFile(other + "/config.json");
  ASSERT_TRUE(config.ok());
  ModelConfig target_config = target_->config();
  target_config.bos_token_id = 2;
  config->bos_token_id = 3;
  auto target = LlamaModel::CreateRandom(target_config, c10::Device(c10::kCPU), at::kFloat, 64, /*seed=*/1);
  ASSERT_TRUE(target.ok()) << target.status();
  ASSERT_TRUE(config->WriteJsonFile(other + "/config.json").ok());
  auto method = MethodFromYaml("{name: m, drafter: {type: model, path: " + other +
                                   "}, verifier: {type: rejection}, length_policy: {type: fixed, gamma: 3}}",
                               target->get());
  ASSERT_FALSE(method.ok());
  EXPECT_THAT(method.status().message(), HasSubstr("bos_token_id 3, the target's 2"));
  EXPECT_THAT(method.status().message(), HasSubstr("drafter.path"));
}

TEST_F(VocabularyMapTest, BadMapsNameTheKey) {
  std::ofstream(dir_ + "/twice.yaml") << "d2t: [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, -1, -1, -1, -1]\n";
  auto twice = MethodFromYaml(Method(", vocab_map: " + dir_ + "/twice.yaml"), target_.get());
  EXPECT_THAT(twice.status().message(), HasSubstr("target id 0 is mapped twice"));
  std::ofstream(dir_ + "/short.yaml") << "d2t: [0, 1]\n";
  auto short_map = MethodFromYaml(Method(", vocab_map: " + dir_ + "/short.yaml"), target_.get());
  EXPECT_THAT(short_map.status().message(), HasSubstr("has 2 entries; the drafter has 20 tokens"));
}

}  // namespace
}  // namespace speclab
