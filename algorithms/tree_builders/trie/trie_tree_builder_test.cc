#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "algorithms/tree_builders/testing/builder_harness.h"
#include "framework/drafter.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::HasSubstr;
using Path = std::vector<int32_t>;

// A token-only drafter that proposes fixed candidates for the root.
class CandidateDrafter final : public Drafter {
 public:
  explicit CandidateDrafter(std::vector<std::vector<int32_t>> candidates) : candidates_(std::move(candidates)) {}
  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }
  absl::Status Reset(absl::Span<const int32_t>, const TargetFeatures&) override { return absl::OkStatus(); }
  absl::Status BeginStep(absl::Span<const int32_t>) override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree&, int, int max_tokens) override {
    std::vector<int32_t> first = candidates_.empty() ? std::vector<int32_t>{} : candidates_.front();
    if (static_cast<int>(first.size()) > max_tokens) first.resize(max_tokens);
    return first;
  }
  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree&, int node, int max_tokens,
                                                                  int max_candidates) override {
    EXPECT_EQ(node, 0);
    asked_tokens = max_tokens;
    asked_candidates = max_candidates;
    return candidates_;  // more and longer than asked: the builder must cut
  }
  absl::Status EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) override {
    return absl::OkStatus();
  }
  int asked_tokens = 0, asked_candidates = 0;

 private:
  std::vector<std::vector<int32_t>> candidates_;
};

std::set<Path> Paths(const DraftTree& draft) {
  std::set<Path> out;
  for (int i = 1; i < draft.tree.size(); ++i) out.insert(draft.tree.PathTokens(i));
  return out;
}

TEST(TrieTreeBuilderTest, MergesContinuationsBestFirstWithinTheBudget) {
  CandidateDrafter drafter({{5, 6, 7}, {5, 6, 8}, {5, 9}, {4, 4, 4, 4}, {5, 6, 7}});
  auto builder = BuilderFromYaml("{type: trie, budget: 6, max_candidates: 4, max_depth: 3}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  EXPECT_FALSE((*builder)->traits().needs_distributions);
  EXPECT_TRUE((*builder)->traits().needs_continuations);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(drafter.asked_tokens, 3);
  EXPECT_EQ(drafter.asked_candidates, 4);
  EXPECT_EQ(draft->sampling, DraftSampling::kDeterministic);
  // 5 6 7 (3 nodes), 5 6 8 (+1), 5 9 (+1), 4 4 4 cut at depth 3 and by the budget after one node.
  EXPECT_EQ(Paths(*draft), (std::set<Path>{{1, 5}, {1, 5, 6}, {1, 5, 6, 7}, {1, 5, 6, 8}, {1, 5, 9}, {1, 4}}));
  ASSERT_EQ(draft->tree.size(), 7);
  for (int i = 1; i < draft->tree.size(); ++i) {
    EXPECT_LT(draft->tree.parent(i), i);
    EXPECT_EQ(draft->tree.token(i), HostTokens(*draft)[i]);
  }
}

TEST(TrieTreeBuilderTest, OneCandidateIsTheChainAndNoneIsTheRootAlone) {
  auto builder = BuilderFromYaml("{type: trie, max_candidates: 1}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  EXPECT_EQ((*builder)->traits().length_control, LengthControl::kMaxLength);
  CandidateDrafter drafter({{3, 1, 4, 1, 5, 9}, {2, 7}});
  auto draft = BuildOnce(**builder, drafter, {.gamma = 4});  // depth: the length policy's 4
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(HostTokens(*draft), (std::vector<int32_t>{1, 3, 1, 4, 1}));
  EXPECT_EQ(draft->tree.max_depth(), 4);
  CandidateDrafter none({});
  auto empty = BuildOnce(**builder, none, {});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->tree.size(), 1);
}

TEST(TrieTreeBuilderTest, OptionErrorsNameFileLineAndKey) {
  EXPECT_THAT(BuilderFromYaml("type: trie\nbudget: 0\n", "t.yaml").status().message(),
              HasSubstr("t.yaml:2: key 'budget': expected a number of drafted nodes in [1, 4096]"));
  EXPECT_THAT(BuilderFromYaml("type: trie\nmax_candidates: 0\n", "t.yaml").status().message(),
              HasSubstr("t.yaml:2: key 'max_candidates'"));
  EXPECT_THAT(BuilderFromYaml("type: trie\nmax_depth: x\n", "t.yaml").status().message(),
              HasSubstr("t.yaml:2: key 'max_depth': expected an integer"));
  EXPECT_THAT(BuilderFromYaml("{type: trie, candidates: 3}", "t.yaml").status().message(),
              HasSubstr("unknown key 'candidates'"));
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
