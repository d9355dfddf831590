// Cacheback's LRU table (rows and followers in least-recently-used order,
// eviction, text fed in pieces), its drafts (a chain carried on by further
// lookups, a tree of every cached follower), its device form (the table on
// the device learning and drafting as the host's does) and decoding with the
// ngram_cache drafter: greedy's tokens at T = 0, the cache carried across
// prompts and between the engine's forms, the target's law at T = 1 with
// branching trees and chains, pipelined and step by step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "drafters/common/lru_ngram_table.h"
#include "drafters/ngram_cache/ngram_cache_drafter.h"
#include "framework/device_transfer.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/device_roots.h"
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

TEST(LruNgramTableTest, RowsRebuildTheTable) {
  LruNgramTable table({.leader_length = 1, .follower_length = 2, .rows = 3, .columns = 2});
  table.Learn({1, 2, 3, 1, 4, 5, 1, 2, 3});
  LruNgramTable copy = LruNgramTable::FromRows(table.shape(), table.Rows());
  EXPECT_EQ(copy.Rows(), table.Rows());
  copy.ContinueText({7, 1, 2, 3});  // the text so far: only "2 3" is kept to continue
  table.Learn({6, 6});
  copy.Learn({6, 6});
  EXPECT_EQ(copy.Rows(), table.Rows());
}

// Pipelined steps on `device`: each gets the root and the token before it,
// and the sequence so far as root.context; some drafts are accepted, then an
// extra token. Every step's drafts must be FixedLengthCachedContinuation()
// of a host table that learned the same text, and afterwards the host steps
// (BeginStep, Continuations) must see that table.
std::vector<std::vector<int64_t>> RunDeviceSteps(c10::Device device, const Tokens& prompt,
                                                 const std::vector<int>& accepted, int length, CacheOptions options,
                                                 int vocab) {
  NgramCacheDrafter drafter(options, device);
  NgramCacheDrafter reference(options, c10::Device(c10::kCPU));  // steps on the host only
  LruNgramTable host(options.shape);
  std::vector<std::vector<int64_t>> drafted;
  Tokens sequence;
  for (int generation = 0; generation < 2; ++generation) {  // the table carried to a second prompt
    EXPECT_TRUE(drafter.Reset(prompt, {}).ok());
    EXPECT_TRUE(reference.Reset(prompt, {}).ok());
    host.EndText();
    host.Learn(prompt);
    sequence = prompt;
    size_t learned = sequence.size();
    for (size_t step = 0; step < accepted.size(); ++step) {
      auto tokens = drafter.ContinuationAt(testing::RootOfSequence(sequence, device), length);
      EXPECT_TRUE(tokens.ok()) << tokens.status();
      const at::Tensor out = tokens->cpu();
      drafted.emplace_back(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + length + 1);
      host.Learn(absl::MakeConstSpan(sequence).subspan(learned));
      learned = sequence.size();
      EXPECT_TRUE(reference.BeginStep(sequence).ok());
      std::vector<int64_t> expected{sequence.back()};
      for (int32_t t : FixedLengthCachedContinuation(host, sequence, length, options.recursive)) expected.push_back(t);
      EXPECT_EQ(drafted.back(), expected) << "generation " << generation << ", step " << step;
      for (int j = 0; j < accepted[step]; ++j) sequence.push_back(static_cast<int32_t>(drafted.back()[1 + j]));
      sequence.push_back(static_cast<int32_t>((sequence.back() + 1 + step) % vocab));
    }
  }
  // The host takes the table back, with the text it learned.
  EXPECT_TRUE(drafter.BeginStep(sequence).ok());
  EXPECT_TRUE(reference.BeginStep(sequence).ok());
  const TokenTree root(sequence.back());
  auto trie = drafter.Continuations(root, 0, 6, 16);
  auto expected_trie = reference.Continuations(root, 0, 6, 16);
  EXPECT_TRUE(trie.ok() && expected_trie.ok());
  if (trie.ok() && expected_trie.ok()) EXPECT_EQ(*trie, *expected_trie);
  return drafted;
}

// The device table fed a random text in steps of 1 to 6 tokens: after each,
// its rows and followers, in recency order, are the host table's.
void ExpectDeviceRowsFollowTheHost(c10::Device device, NgramTableShape shape, int vocab, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const at::Tensor text = at::randint(vocab, {300}, gen, at::TensorOptions().dtype(at::kLong));
  const int64_t* t = text.data_ptr<int64_t>();
  DeviceNgramTable table(shape, device);
  LruNgramTable host(shape);
  host.Learn({static_cast<int32_t>(t[0]), static_cast<int32_t>(t[1])});
  table.Load(host, 2);
  const at::Tensor context = text.to(device);
  for (int64_t n = 2, step = 0; n < 300; ++step) {
    const int64_t next = std::min<int64_t>(300, n + 1 + step % 6);
    Tokens piece(t + n, t + next);
    host.Learn(piece);
    n = next;
    ASSERT_TRUE(table.LearnAndDraft(context, context.narrow(0, n - 2, 2), LongsToDevice({n - 2}, device), 3, true).ok());
    ASSERT_EQ(table.Rows(), host.Rows()) << "after " << n << " tokens";
    ASSERT_EQ(table.learned(), n);
  }
}

TEST(NgramCacheDrafterTest, DeviceTableKeepsTheHostTablesOrder) {
  // Full tables: rows and followers evicted least recent first.
  ExpectDeviceRowsFollowTheHost(c10::Device(c10::kCPU), {.leader_length = 1, .follower_length = 2, .rows = 4,
                                                         .columns = 2}, 6, 1);
  ExpectDeviceRowsFollowTheHost(c10::Device(c10::kCPU), {.leader_length = 2, .follower_length = 1, .rows = 16,
                                                         .columns = 3}, 4, 2);
}

TEST(NgramCacheDrafterTest, DeviceTableDraftsAsTheHostTable) {
  const Tokens prompt = {1, 2, 3, 1, 2, 4, 1, 2, 3, 3};
  const std::vector<int> accepted = {2, 0, 4, 1, 0, 4, 3, 4, 4, 0, 2};
  for (bool recursive : {true, false}) {
    // A full table (3 rows, 2 columns) evicts as the host's does.
    for (NgramTableShape shape : {NgramTableShape{.leader_length = 1, .follower_length = 2, .rows = 3, .columns = 2},
                                  NgramTableShape{.leader_length = 2, .follower_length = 3, .rows = 64, .columns = 4}})
      RunDeviceSteps(c10::Device(c10::kCPU), prompt, accepted, 5, {.shape = shape, .recursive = recursive}, 5);
  }
}

TEST(NgramCacheDrafterTest, CudaKernelDraftsAsTheHost) {
  SPECLAB_SKIP_UNLESS_CUDA();
  ExpectDeviceRowsFollowTheHost(c10::Device(c10::kCUDA), {.leader_length = 1, .follower_length = 2, .rows = 4,
                                                          .columns = 2}, 6, 1);
  ExpectDeviceRowsFollowTheHost(c10::Device(c10::kCUDA), {.leader_length = 2, .follower_length = 1, .rows = 300,
                                                          .columns = 3}, 20, 2);
  at::Generator gen = at::detail::createCPUGenerator(5);
  for (int vocab : {3, 6, 40}) {
    for (int64_t prompt_length : {2, 9, 700}) {
      const at::Tensor random = at::randint(vocab, {prompt_length}, gen, at::TensorOptions().dtype(at::kLong));
      const Tokens prompt(random.data_ptr<int64_t>(), random.data_ptr<int64_t>() + prompt_length);
      std::vector<int> accepted;
      for (int i = 0; i < 12; ++i) accepted.push_back((i * 7 + vocab) % 6);
      // 600 rows: more than the block's 256 threads scan at once; 8 rows: evictions.
      for (int rows : {8, 600}) {
        const CacheOptions options{.shape = {.leader_length = 2, .follower_length = 2, .rows = rows, .columns = 3}};
        EXPECT_EQ(RunDeviceSteps(c10::Device(c10::kCUDA), prompt, accepted, 5, options, vocab),
                  RunDeviceSteps(c10::Device(c10::kCPU), prompt, accepted, 5, options, vocab))
            << "vocab " << vocab << ", prompt " << prompt_length << ", rows " << rows;
      }
    }
  }
}

// Pipelined tree steps on `device`, as RunDeviceSteps: every step's
// candidates (ContinuationsAt; every third step a chain, ContinuationAt, on
// the same table) must be CachedContinuations() of a host table that learned
// the same text, in DeviceContinuations' shape (the root past each). Returns
// how many candidates were found in all.
int ExpectDeviceCandidatesOfTheHost(c10::Device device, const Tokens& prompt, const std::vector<int>& accepted,
                                    int max_tokens, int max_candidates, CacheOptions options, int vocab) {
  NgramCacheDrafter drafter(options, device);
  LruNgramTable host(options.shape);
  EXPECT_TRUE(drafter.Reset(prompt, {}).ok());
  host.Learn(prompt);
  Tokens sequence = prompt;
  size_t learned = sequence.size();
  int found = 0;
  for (size_t step = 0; step < accepted.size(); ++step) {
    const DeviceRoot root = testing::RootOfSequence(sequence, device);
    host.Learn(absl::MakeConstSpan(sequence).subspan(learned));
    learned = sequence.size();
    const std::string where = absl::StrCat(device.str(), ", vocab ", vocab, ", step ", step, ", ", max_candidates,
                                           " of ", max_tokens, ", recursive ", options.recursive);
    Tokens next;  // the drafts accepted
    if (step % 3 == 2) {
      auto chain = drafter.ContinuationAt(root, max_tokens);
      EXPECT_TRUE(chain.ok()) << chain.status();
      if (!chain.ok()) return found;
      const at::Tensor tokens = chain->cpu();
      next.assign(tokens.data_ptr<int64_t>() + 1, tokens.data_ptr<int64_t>() + 1 + max_tokens);
    } else {
      auto got = drafter.ContinuationsAt(root, max_tokens, max_candidates);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return found;
      const auto expected = CachedContinuations(host, sequence, max_tokens, max_candidates, options.recursive);
      found += static_cast<int>(expected.size());
      testing::ExpectContinuations(*got, expected, sequence.back(), where);
      if (!expected.empty()) next = expected.back();  // the deepest branch, say
    }
    for (int j = 0; j < accepted[step] && j < static_cast<int>(next.size()); ++j) sequence.push_back(next[j]);
    sequence.push_back(static_cast<int32_t>((sequence.back() + 1 + step) % vocab));
  }
  return found;
}

TEST(NgramCacheDrafterTest, ContinuationsAtAreTheHostsCandidates) {
  const c10::Device device = testing::TestDevice();
  at::Generator gen = at::detail::createCPUGenerator(7);
  int found = 0;
  for (int vocab : {3, 6, 40}) {
    for (int64_t prompt_length : {2, 9, 300}) {
      const at::Tensor random = at::randint(vocab, {prompt_length}, gen, at::TensorOptions().dtype(at::kLong));
      const Tokens prompt(random.data_ptr<int64_t>(), random.data_ptr<int64_t>() + prompt_length);
      std::vector<int> accepted;
      for (int i = 0; i < 10; ++i) accepted.push_back((i * 5 + vocab) % 4);
      for (bool recursive : {true, false}) {
        // 8 rows of 2 columns: evictions; 600 rows: more rows than the block's threads.
        for (auto [leader, follower, rows, columns] : {std::tuple{1, 2, 8, 2}, std::tuple{2, 1, 600, 4},
                                                       std::tuple{1, 3, 64, 3}}) {
          const CacheOptions options{.shape = {.leader_length = leader, .follower_length = follower, .rows = rows,
                                               .columns = columns},
                                     .recursive = recursive};
          for (auto [max_tokens, max_candidates] : {std::pair{6, 16}, std::pair{1, 1}, std::pair{10, 64}})
            found += ExpectDeviceCandidatesOfTheHost(device, prompt, accepted, max_tokens, max_candidates, options,
                                                     vocab);
        }
      }
    }
  }
  EXPECT_GT(found, 1000);
}

const Tokens kPrompt = {1, 5, 3, 7, 2, 5, 3};

// The engine's forms in turn on one drafter: the table moves to the device
// for pipelined chains and back for step-by-step ones, and each run drafts
// from what the runs before it generated: a step-by-step run after a
// pipelined one accepts more than one on a fresh cache.
TEST(NgramCacheDrafterTest, PipelinedAndStepByStepChainsShareTheCache) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  auto greedy = GenerateAutoregressive(*target, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
  ASSERT_TRUE(greedy.ok());
  const std::string yaml =
      "{name: cache, drafter: {type: ngram_cache, leader: 2, follower: 3}, verifier: {type: greedy}, "
      "length_policy: {type: fixed, gamma: 6}}";
  auto run = [&](Method& method, bool pipeline) {
    auto out = GenerateSpeculative(*target, method, kPrompt,
                                   {.sampling = {.temperature = 0}, .max_new_tokens = 30, .pipeline = pipeline});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return 0;
    EXPECT_EQ(out->tokens, greedy->tokens) << "pipeline " << pipeline;
    EXPECT_THAT(out->engine_form, HasSubstr(pipeline ? "pipelined chain" : "step by step"));
    int accepted = 0;
    for (const StepStats& step : out->steps) accepted += step.accepted;
    return accepted;
  };
  auto fresh = testing::MethodFromYaml(yaml, target.get());
  auto shared = testing::MethodFromYaml(yaml, target.get());
  ASSERT_TRUE(fresh.ok() && shared.ok());
  const int on_a_fresh_cache = run(*fresh, /*pipeline=*/false);
  run(*shared, /*pipeline=*/true);
  EXPECT_GT(run(*shared, /*pipeline=*/false), on_a_fresh_cache) << "the host drafts what the device learned";
  EXPECT_GE(run(*shared, /*pipeline=*/true), 15) << "the device drafts what the host had";
}

TEST(NgramCacheDrafterTest, PipelinedChainsMatchTargetLawAtTemperatureOne) {
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const Tokens prompt = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};
  auto method = testing::MethodFromYaml(
      "{name: cache, drafter: {type: ngram_cache, leader: 1, follower: 2, transient: true}, "
      "verifier: {type: point_mass}, length_policy: {type: fixed, gamma: 3}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, prompt, testing::ExactTwoTokenLaw(*target, prompt, 1.0),
                                              2000, "ngram_cache chain");
}

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
        // Step by step (pipelined chains: PipelinedAndStepByStepChainsShareTheCache).
        auto out = GenerateSpeculative(*target, *method, kPrompt,
                                       {.sampling = {.temperature = 0}, .max_new_tokens = 30, .pipeline = false});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ(out->tokens, greedy->tokens) << builder << " " << verifier << " run " << run;
        for (const StepStats& step : out->steps) accepted[run] += step.accepted;
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
  EXPECT_GT(sample.branching, kRuns / 2) << "the trees branched";
  testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, prompt, testing::ExactTwoTokenLaw(*target, prompt, 1.0),
                                              kRuns, "ngram_cache trie");
}

// Tries pipelined: greedy's tokens, steps that count the host trie's nodes
// (the device's is filled to its budget: trie_device.h), and the table
// carried to the next prompt as for chains.
TEST(NgramCacheDrafterTest, PipelinedTriesEqualGreedy) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  auto greedy = GenerateAutoregressive(*target, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
  ASSERT_TRUE(greedy.ok());
  auto method = testing::MethodFromYaml(
      "{name: cache, drafter: {type: ngram_cache, leader: 2, follower: 3}, "
      "tree_builder: {type: trie, budget: 12, max_candidates: 12}, verifier: {type: point_mass}, "
      "length_policy: {type: fixed, gamma: 6}}",
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  int accepted[2] = {0, 0}, filled = 0;
  for (int run = 0; run < 2; ++run) {
    auto out = GenerateSpeculative(*target, *method, kPrompt,
                                   {.sampling = {.temperature = 0}, .max_new_tokens = 30, .pipeline = true});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << "run " << run;
    EXPECT_THAT(out->engine_form, HasSubstr("pipelined tree"));
    for (const StepStats& step : out->steps) {
      accepted[run] += step.accepted;
      EXPECT_GE(step.tree_nodes, 1);
      EXPECT_LE(step.tree_nodes, 12);
      filled += step.tree_nodes == 12;
    }
  }
  EXPECT_LT(filled, 10) << "the steps count the host trie's nodes, not the device trie's filled size";
  EXPECT_GT(accepted[1], accepted[0]) << "the second run drafts the first's output";
  EXPECT_GE(accepted[1], 15);
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
