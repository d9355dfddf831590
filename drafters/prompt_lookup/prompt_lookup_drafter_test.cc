#include "drafters/prompt_lookup/prompt_lookup_drafter.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "framework/device_transfer.h"
#include "tests/support/cuda_tests.h"

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

}  // namespace
}  // namespace speclab
