#include "drafters/prompt_lookup/prompt_lookup_drafter.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>

#include "absl/strings/str_cat.h"
#include "framework/device_transfer.h"
#include "framework/speculative_decoder.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/device_roots.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab {
namespace {

TEST(PromptLookupTest, FirstMatchFromTheStartWithLongestNgram) {
  // Last 3 tokens (1 2 3) occur at 0 and at 5; the first occurrence wins.
  const std::vector<int32_t> seq = {1, 2, 3, 9, 9, 1, 2, 3, 7, 7, 1, 2, 3};
  EXPECT_EQ(LookupContinuation(seq, 3, 4), (std::vector<int32_t>{9, 9, 1, 2}));
}

TEST(PromptLookupTest, FallsBackToShorterNgramsAndStopsAtTheEnd) {
  const std::vector<int32_t> seq = {4, 5, 6, 8, 5};  // "8 5" never seen, "5" seen at 1
  EXPECT_EQ(LookupContinuation(seq, 2, 10), (std::vector<int32_t>{6, 8, 5}));
  EXPECT_TRUE(LookupContinuation({1, 2, 3}, 3, 5).empty());
}

TEST(PromptLookupTest, DrafterContinuesTheTreePath) {
  PromptLookupDrafter drafter(2, 3);
  ASSERT_TRUE(drafter.BeginStep({1, 2, 3, 4, 1}).ok());
  TokenTree tree(1);
  const int node = tree.AddNode(0, 2);  // path "1 2" -> lookup on 1 2 3 4 1 2
  auto continuation = drafter.Continuation(tree, node, 10);
  ASSERT_TRUE(continuation.ok());
  EXPECT_EQ(*continuation, (std::vector<int32_t>{3, 4, 1}));
  EXPECT_EQ(drafter.kind(), DrafterKind::kTokensOnly);
}

// Every match, longest n-gram first, occurrences from the start; duplicates
// once; the first candidate is the chain's continuation.
TEST(PromptLookupTest, CandidatesAreEveryMatchLongestNgramFirst) {
  const std::vector<int32_t> seq = {1, 2, 3, 9, 9, 1, 2, 3, 7, 7, 5, 2, 3, 6, 1, 2, 3};
  const auto candidates = LookupCandidates(seq, 3, 3, 10);
  const std::vector<std::vector<int32_t>> expected = {
      {9, 9, 1}, {7, 7, 5},  // "1 2 3" at 0 and 5
      {6, 1, 2},             // "2 3" also at 11 (at 1 and 6 it repeats the above, as "3" does everywhere)
  };
  EXPECT_EQ(candidates, expected);
  EXPECT_EQ(LookupCandidates({4, 8, 5, 4, 6, 4}, 2, 2, 10),  // "6 4" unseen; "4" at 0 and 3
            (std::vector<std::vector<int32_t>>{{8, 5}, {6, 4}}));
  EXPECT_EQ(candidates.front(), LookupContinuation(seq, 3, 3));
  EXPECT_EQ(LookupCandidates(seq, 3, 3, 2), (std::vector<std::vector<int32_t>>{{9, 9, 1}, {7, 7, 5}}));
  EXPECT_TRUE(LookupCandidates({1, 2, 3}, 3, 5, 4).empty());

  PromptLookupDrafter drafter(3, 2);  // num_pred_tokens 2 caps every candidate
  ASSERT_TRUE(drafter.BeginStep(seq).ok());
  auto from_drafter = drafter.Continuations(TokenTree(3), 0, 10, 2);
  ASSERT_TRUE(from_drafter.ok()) << from_drafter.status();
  EXPECT_EQ(*from_drafter, (std::vector<std::vector<int32_t>>{{9, 9}, {7, 7}}));
}

TEST(PromptLookupTest, FixedLengthContinuationRepeatsTheMatchAndFillsWithTheRoot) {
  // "2 3" matches at 1: 4 2 3, then the drafts themselves (4 2 3 4 ...).
  const std::vector<int32_t> seq = {1, 2, 3, 4, 2, 3};
  EXPECT_EQ(LookupContinuation(seq, 2, 10), (std::vector<int32_t>{4, 2, 3}));
  EXPECT_EQ(FixedLengthContinuation(seq, 2, 7), (std::vector<int32_t>{4, 2, 3, 4, 2, 3, 4}));
  EXPECT_EQ(FixedLengthContinuation(seq, 2, 2), (std::vector<int32_t>{4, 2}));
  EXPECT_EQ(FixedLengthContinuation({5, 6, 7}, 3, 3), (std::vector<int32_t>{7, 7, 7}));  // nothing matches
  EXPECT_EQ(FixedLengthContinuation({5, 5}, 3, 2), (std::vector<int32_t>{5, 5}));
  EXPECT_EQ(LookupFrom({5, 6, 7}, 3), std::nullopt);
}

// Pipelined steps on `device`: each call gets the root and the token before
// it on the device, the drafter keeps the context there; every step's drafts
// must be FixedLengthContinuation of the sequence so far, whatever number of
// the previous drafts was accepted.
std::vector<std::vector<int64_t>> RunDeviceSteps(c10::Device device, const std::vector<int32_t>& prompt,
                                                 const std::vector<int>& accepted, int length, int max_ngram,
                                                 int vocab, std::vector<std::vector<int32_t>>* sequences) {
  PromptLookupDrafter drafter(max_ngram, length, device, /*capacity=*/8);  // grows as the steps need
  EXPECT_TRUE(drafter.Reset(prompt, {}).ok());
  std::vector<int32_t> sequence = prompt;
  std::vector<std::vector<int64_t>> drafted;
  int64_t max_start = static_cast<int64_t>(prompt.size()) - 2;
  for (size_t step = 0; step < accepted.size(); ++step) {
    const int64_t n = static_cast<int64_t>(sequence.size());
    const DeviceRoot root{.last_two = LongsToDevice({sequence[n - 2], sequence[n - 1]}, device),
                          .position = {.start = LongsToDevice({n - 2}, device), .max_start = max_start}};
    auto tokens = drafter.ContinuationAt(root, length);
    EXPECT_TRUE(tokens.ok()) << tokens.status();
    const at::Tensor host = tokens->cpu();
    drafted.emplace_back(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + length + 1);
    if (sequences != nullptr) sequences->push_back(sequence);
    // Accept some drafts (at most all `length`), then an extra token.
    EXPECT_LE(accepted[step], length);
    for (int j = 0; j < accepted[step]; ++j) sequence.push_back(static_cast<int32_t>(drafted.back()[1 + j]));
    sequence.push_back(static_cast<int32_t>((sequence.back() + 1 + step) % vocab));
    max_start += length + 1;
  }
  return drafted;
}

TEST(PromptLookupTest, ContinuationAtDraftsFromTheDeviceContext) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 1, 2};
  const std::vector<int> accepted = {2, 0, 4, 1, 0, 4, 3};
  std::vector<std::vector<int32_t>> sequences;
  const auto drafted = RunDeviceSteps(c10::Device(c10::kCPU), prompt, accepted, 4, 2, 5, &sequences);
  for (size_t step = 0; step < drafted.size(); ++step) {
    std::vector<int64_t> expected{sequences[step].back()};
    for (int32_t t : FixedLengthContinuation(sequences[step], 2, 4)) expected.push_back(t);
    EXPECT_EQ(drafted[step], expected) << "step " << step;
  }
  // Longer than num_pred_tokens: the engine steps on the host instead.
  PromptLookupDrafter drafter(2, 3);
  ASSERT_TRUE(drafter.Reset(prompt, {}).ok());
  const DeviceRoot root{.last_two = LongsToDevice({1, 2}, c10::Device(c10::kCPU)),
                        .position = {.start = LongsToDevice({4}, c10::Device(c10::kCPU)), .max_start = 4}};
  EXPECT_EQ(drafter.ContinuationAt(root, 4).status().code(), absl::StatusCode::kUnimplemented);
}

TEST(PromptLookupTest, CudaKernelDraftsAsTheHost) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(5);
  for (int vocab : {3, 6, 40}) {
    for (int64_t prompt_length : {2, 9, 700, 1500}) {  // past one pass of the block's 1024 threads
      const at::Tensor random = at::randint(vocab, {prompt_length}, gen, at::TensorOptions().dtype(at::kLong));
      const std::vector<int32_t> prompt(random.data_ptr<int64_t>(), random.data_ptr<int64_t>() + prompt_length);
      std::vector<int> accepted;
      for (int i = 0; i < 12; ++i) accepted.push_back(static_cast<int>((i * 7 + vocab) % 6));
      for (int max_ngram : {1, 3}) {
        EXPECT_EQ(RunDeviceSteps(c10::Device(c10::kCUDA), prompt, accepted, 5, max_ngram, vocab, nullptr),
                  RunDeviceSteps(c10::Device(c10::kCPU), prompt, accepted, 5, max_ngram, vocab, nullptr))
            << "vocab " << vocab << ", prompt " << prompt_length << ", max_ngram " << max_ngram;
      }
    }
  }
}

TEST(PromptLookupTest, GuessesAreTheFixedLengthContinuationThroughAnyPosition) {
  // GuessOf's guess after position r of a sequence (stale entries past it)
  // is FixedLengthContinuation of the sequence through r: the kernel on CUDA,
  // the host rule elsewhere; at positions past one pass of the kernel's block.
  const c10::Device device = testing::TestDevice();
  at::Generator gen = at::detail::createCPUGenerator(3);
  PromptLookupDrafter drafter(/*max_ngram=*/3, /*num_pred_tokens=*/6, device);
  auto guess = drafter.GuessOf(5);
  ASSERT_TRUE(guess.ok()) << guess.status();
  EXPECT_EQ(guess->count(), 5);
  int matched = 0;
  for (int vocab : {3, 40}) {
    for (int64_t length : {2, 9, 1500}) {
      const at::Tensor random = at::randint(vocab, {length}, gen, at::TensorOptions().dtype(at::kLong));
      const std::vector<int32_t> sequence(random.data_ptr<int64_t>(), random.data_ptr<int64_t>() + length);
      for (int64_t root : {int64_t{1}, length / 2, length - 1}) {
        if (root < 1) continue;
        // Through the root, then stale tokens outside the vocabulary.
        const at::Tensor stored = at::cat({random.narrow(0, 0, root + 1), at::full({16}, vocab + 3, random.options())});
        const at::Tensor got = (*guess)(stored.to(device), LongsToDevice({root}, device)).cpu();
        const std::vector<int32_t> through(sequence.begin(), sequence.begin() + root + 1);
        const std::vector<int32_t> expected = FixedLengthContinuation(through, 3, 5);
        EXPECT_EQ(std::vector<int64_t>(got.data_ptr<int64_t>(), got.data_ptr<int64_t>() + got.numel()),
                  std::vector<int64_t>(expected.begin(), expected.end()))
            << "vocab " << vocab << ", length " << length << ", root " << root;
        matched += LookupFrom(through, 3).has_value();
      }
    }
  }
  EXPECT_GT(matched, 5) << "too few matches to see the continuation rule";
  EXPECT_EQ(drafter.GuessOf(7).status().code(), absl::StatusCode::kUnimplemented);  // past num_pred_tokens
}

// ContinuationsAt on `device` is LookupCandidates() of root.context's
// sequence then the root: every candidate and its length, the root past it.
// Returns how many candidates were found in all.
int ExpectCandidatesOfTheHost(c10::Device device, int vocab, int64_t length, int max_ngram, int max_tokens,
                              int max_candidates, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const at::Tensor random = at::randint(vocab, {length}, gen, at::TensorOptions().dtype(at::kLong));
  const std::vector<int32_t> sequence(random.data_ptr<int64_t>(), random.data_ptr<int64_t>() + length);
  PromptLookupDrafter drafter(max_ngram, /*num_pred_tokens=*/8);
  // Stale entries at and past the root's slots.
  auto got = drafter.ContinuationsAt(testing::RootOfSequence(sequence, device, 16, vocab + 3), max_tokens,
                                     max_candidates);
  EXPECT_TRUE(got.ok()) << got.status();
  if (!got.ok()) return 0;
  const auto expected = LookupCandidates(sequence, max_ngram, std::min(max_tokens, 8), max_candidates);
  testing::ExpectContinuations(*got, expected, sequence.back(),
                               absl::StrCat(device.str(), ", vocab ", vocab, ", sequence of ", length, ", max_ngram ",
                                            max_ngram, ", ", max_candidates, " of ", max_tokens));
  return static_cast<int>(expected.size());
}

TEST(PromptLookupTest, ContinuationsAtAreTheHostsCandidates) {
  const c10::Device device = testing::TestDevice();
  int found = 0;
  for (int vocab : {3, 6, 40}) {
    for (int64_t length : {2, 9, 700, 1500}) {
      for (auto [max_ngram, max_tokens, max_candidates] : {std::tuple{1, 4, 8}, std::tuple{3, 10, 64},
                                                           std::tuple{2, 1, 1}}) {
        found += ExpectCandidatesOfTheHost(device, vocab, length, max_ngram, max_tokens, max_candidates,
                                           length * 7 + vocab);
      }
    }
  }
  if (device.is_cuda())  // past the kernel's shared copy of the sequence
    found += ExpectCandidatesOfTheHost(device, 6, 9000, 3, 6, 16, 1);
  EXPECT_GT(found, 100);
}

// The trie of prompt lookup's matches, pipelined: greedy's tokens at T = 0
// and the target's law at T = 1 (a tree that branches on the prompt's
// repeats).
TEST(PromptLookupTest, PipelinedTriesEqualGreedyAndKeepTheLaw) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3, 6, 5};
  auto greedy = GenerateAutoregressive(*target, prompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
  ASSERT_TRUE(greedy.ok());
  const std::string yaml =
      "{name: pld, drafter: {type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 4}, "
      "tree_builder: {type: trie, budget: 10, max_candidates: 4}, verifier: {type: point_mass}, "
      "length_policy: {type: fixed, gamma: 4}}";
  auto method = testing::MethodFromYaml(yaml, target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  auto out = GenerateSpeculative(*target, *method, prompt,
                                 {.sampling = {.temperature = 0}, .max_new_tokens = 30, .pipeline = true});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens);
  EXPECT_THAT(out->engine_form, ::testing::HasSubstr("pipelined tree"));
  // Step by step: the same tries (the device's is filled to its budget, but
  // the steps count the nodes the host's trie has; where it has none, the
  // device verifies node 1 all the same, a copy of the root's token).
  auto stepwise = GenerateSpeculative(*target, *method, prompt,
                                      {.sampling = {.temperature = 0}, .max_new_tokens = 30, .pipeline = false});
  ASSERT_TRUE(stepwise.ok()) << stepwise.status();
  ASSERT_EQ(out->steps.size(), stepwise->steps.size());
  int accepted = 0;
  for (size_t i = 0; i < out->steps.size(); ++i) {
    accepted += out->steps[i].accepted;
    EXPECT_EQ(out->steps[i].tree_nodes, std::max(stepwise->steps[i].tree_nodes, 1)) << "step " << i;
    EXPECT_EQ(out->steps[i].longest_path, std::max(stepwise->steps[i].longest_path, 1)) << "step " << i;
  }
  EXPECT_GT(accepted, 5);

  auto law_target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const std::vector<int32_t> law_prompt = {2, 3, 5, 4, 2, 3, 6, 1, 2, 3};  // "2 3" followed by "5 4" and "6 1"
  auto law_method = testing::MethodFromYaml(yaml, law_target.get());
  ASSERT_TRUE(law_method.ok()) << law_method.status();
  testing::ExpectTheLawPipelinedAndStepByStep(*law_target, *law_method, law_prompt,
                                              testing::ExactTwoTokenLaw(*law_target, law_prompt, 1.0), 2000,
                                              "prompt_lookup trie");
}

}  // namespace
}  // namespace speclab
