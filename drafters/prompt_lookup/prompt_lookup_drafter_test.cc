#include "drafters/prompt_lookup/prompt_lookup_drafter.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace speclab
