#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/testing/builder_harness.h"
#include "framework/device/device_tree_builder.h"
#include "framework/device_transfer.h"
#include "framework/drafter.h"
#include "framework/core/length_policy.h"
#include "tests/support/cuda_tests.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::HasSubstr;
using Path = std::vector<int32_t>;

// A token-only drafter that proposes fixed candidates for the root, on the
// host and (cut to what the builder asks) on the device.
class CandidateDrafter final : public Drafter, public DeviceDrafter {
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
  absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                      int max_candidates) override {
    std::vector<int64_t> tokens(max_candidates * max_tokens, 99), lengths(max_candidates, 0);
    for (int c = 0; c < max_candidates && c < static_cast<int>(candidates_.size()); ++c) {
      lengths[c] = std::min<int64_t>(max_tokens, candidates_[c].size());
      std::copy_n(candidates_[c].begin(), lengths[c], tokens.begin() + c * max_tokens);
    }
    const c10::Device device = root.last_two.device();
    return DeviceContinuations{.tokens = LongsToDevice(tokens, device).view({max_candidates, max_tokens}),
                               .lengths = LongsToDevice(lengths, device)};
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

// The device form (BuildAt) makes the host's trie from the same candidates:
// its first nodes are Build()'s, in order (and counted as its drafted
// nodes), and the rest, to 1 + min(budget, candidates * depth) nodes, copies
// of node 1 under the root. Candidates
// over a vocabulary of 3 share prefixes and repeat one another.
TEST(TrieTreeBuilderTest, DeviceTrieIsTheHostsFilledToItsSize) {
  const c10::Device device = testing::TestDevice();
  std::mt19937_64 rng(3);
  int compared = 0, filled = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<std::vector<int32_t>> candidates(rng() % 9);
    for (auto& candidate : candidates) {
      candidate.resize(rng() % 7);
      for (int32_t& t : candidate) t = static_cast<int32_t>(rng() % 3);
    }
    if (candidates.size() > 2 && trial % 3 == 0) candidates[2] = candidates[0];
    const int budget = std::vector<int>{1, 2, 5, 40}[trial % 4];
    const int max_candidates = std::vector<int>{1, 3, 8}[trial % 3];
    const int depth = std::vector<int>{1, 3, 6}[(trial / 3) % 3];
    auto builder = BuilderFromYaml(absl::StrCat("{type: trie, budget: ", budget, ", max_candidates: ", max_candidates,
                                                ", max_depth: ", depth, "}"));
    ASSERT_TRUE(builder.ok()) << builder.status();
    CandidateDrafter drafter(candidates);
    auto host = BuildOnce(**builder, drafter, {.root_token = 7});
    ASSERT_TRUE(host.ok()) << host.status();

    DeviceTreeBuilder* form = DeviceFormOf(**builder);
    ASSERT_NE(form, nullptr);
    Options policy_spec = *Options::FromString("{type: fixed, gamma: 4}", "policy");
    auto policy = LengthPolicyRegistry::Create(policy_spec, "policy");
    ASSERT_TRUE(policy.ok());
    const DeviceRoot root{.last_two = LongsToDevice({3, 7}, device),
                          .position = {.start = LongsToDevice({0}, device), .max_start = 0},
                          .context = LongsToDevice({3, 7}, device)};
    auto draft = form->BuildAt(drafter, {.root_token = -1, .policy = policy->get(), .device = device}, root);
    ASSERT_TRUE(draft.ok()) << draft.status();
    ASSERT_TRUE(draft->device_shape.has_value());
    EXPECT_EQ(draft->device_shape->depth_bound, depth);
    const at::Tensor depths = draft->device_shape->depths.cpu();
    ASSERT_TRUE(ReadShape(*draft).ok());
    const std::vector<int32_t> tokens = HostTokens(*draft);
    const std::vector<int32_t> host_tokens = HostTokens(*host);
    const int n = 1 + std::min(budget, max_candidates * depth), m = host->tree.size();
    const std::string where = absl::StrCat("trial ", trial, ": ", candidates.size(), " candidates, budget ", budget,
                                           ", max_candidates ", max_candidates, ", depth ", depth);
    ASSERT_EQ(draft->tree.size(), n) << where;
    ASSERT_LE(m, n) << where;
    ASSERT_TRUE(draft->drafted_nodes.defined()) << where;
    EXPECT_EQ(draft->drafted_nodes.cpu().item<int64_t>(), std::max(m - 1, 1)) << where << ": the host's nodes";
    EXPECT_EQ(tokens[0], 7) << where;
    for (int i = 1; i < n; ++i) {
      if (i < m) {
        EXPECT_EQ(draft->tree.parent(i), host->tree.parent(i)) << where << ", node " << i;
        EXPECT_EQ(tokens[i], host_tokens[i]) << where << ", node " << i;
      } else {
        EXPECT_EQ(draft->tree.parent(i), 0) << where << ", node " << i;
        EXPECT_EQ(tokens[i], tokens[1]) << where << ", node " << i;
      }
    }
    for (int i = 1; i < n; ++i) EXPECT_EQ(depths.data_ptr<int64_t>()[i], draft->tree.depth(i)) << where;
    compared += m > 2;
    filled += m < n;
  }
  EXPECT_GT(compared, 20);
  EXPECT_GT(filled, 10);
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
