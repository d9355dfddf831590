#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "algorithms/tree_builders/testing/builder_harness.h"
#include "algorithms/tree_builders/testing/table_drafter.h"
#include "drafters/model/model_drafter.h"
#include "tests/support/host_only_drafter.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::HasSubstr;
using Path = std::vector<int32_t>;

// EAGLE-2's topK_genrate written out on token paths: the pool in order, each
// entry (path, score); the kept nodes are the `keep` best (ties: earlier).
std::set<Path> ReferenceTree(const TableDrafter& drafter, int32_t root, int k, int depth, int keep) {
  std::vector<std::pair<Path, double>> pool;
  auto expand = [&](const Path& path, double score) {
    at::Tensor logq = drafter.Logits(path).log_softmax(-1);
    auto [values, indices] = logq.topk(k);
    std::vector<std::pair<Path, double>> out;
    for (int j = 0; j < k; ++j) {
      Path child = path;
      child.push_back(static_cast<int32_t>(indices[j].item<int64_t>()));
      out.push_back({child, score + values[j].item<double>()});
    }
    return out;
  };
  auto best_k = [&](std::vector<std::pair<Path, double>> v, int n) {
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    v.resize(std::min<size_t>(n, v.size()));
    return v;
  };
  std::vector<std::pair<Path, double>> frontier = expand({root}, 0.0);
  pool = frontier;
  for (int i = 0; i < depth; ++i) {
    std::vector<std::pair<Path, double>> level;
    for (const auto& [path, score] : frontier)
      for (auto& c : expand(path, score)) level.push_back(c);
    pool.insert(pool.end(), level.begin(), level.end());
    frontier = best_k(level, k);
  }
  std::set<Path> kept;
  for (const auto& [path, score] : best_k(pool, keep)) kept.insert(path);
  return kept;
}

TEST(DynamicTopKTreeBuilderTest, KeepsTheBestPoolNodesOfEagle2) {
  for (auto [k, depth, total] : {std::tuple{3, 3, 12}, std::tuple{4, 2, 16}, std::tuple{2, 5, 9}}) {
    auto builder = BuilderFromYaml("{type: dynamic_topk, top_k: " + std::to_string(k) + ", depth: " +
                                   std::to_string(depth) + ", total_tokens: " + std::to_string(total) + "}");
    ASSERT_TRUE(builder.ok()) << builder.status();
    EXPECT_FALSE((*builder)->traits().samples_tokens);
    TableDrafter drafter(16, 11, /*scale=*/2.0);
    auto draft = BuildOnce(**builder, drafter, {});
    ASSERT_TRUE(draft.ok()) << draft.status();
    EXPECT_EQ(draft->sampling, DraftSampling::kDeterministic);
    EXPECT_FALSE(draft->draft_probs.defined());
    const TokenTree& tree = draft->tree;
    ASSERT_EQ(tree.size(), total);
    EXPECT_LE(tree.max_depth(), depth + 1);
    std::set<Path> paths;
    for (int i = 1; i < tree.size(); ++i) {
      EXPECT_LT(tree.parent(i), i);
      EXPECT_EQ(tree.token(i), HostTokens(*draft)[i]);
      paths.insert(tree.PathTokens(i));
    }
    EXPECT_EQ(paths, ReferenceTree(drafter, 1, k, depth, total - 1)) << "k " << k << " depth " << depth;
    // depth + 1 forwards: the root, then one per frontier of K nodes.
    ASSERT_EQ(static_cast<int>(drafter.calls().size()), depth + 1);
    for (int i = 1; i <= depth; ++i) EXPECT_EQ(static_cast<int>(drafter.calls()[i].size()), k);
  }
}

TEST(DynamicTopKTreeBuilderTest, LevelsOnTheDeviceGrowTheHostsTree) {
  // The model drafter grows the levels on the device (each frontier chosen
  // there, the tree kept there; with static shapes, the body of the one CUDA
  // graph); behind testing::HostOnlyDrafter it is fed from the host tree, one
  // read per level. Same tree, node for node, and the same forwards.
  for (bool static_shapes : {false, true}) {
    for (auto [k, depth, total] : {std::tuple{3, 3, 12}, std::tuple{4, 2, 16}, std::tuple{2, 5, 9}}) {
      SCOPED_TRACE(::testing::Message() << "k " << k << " depth " << depth << (static_shapes ? " static" : ""));
      auto builder = BuilderFromYaml("{type: dynamic_topk, top_k: " + std::to_string(k) + ", depth: " +
                                     std::to_string(depth) + ", total_tokens: " + std::to_string(total) + "}");
      ASSERT_TRUE(builder.ok()) << builder.status();
      std::unique_ptr<LlamaModel> device_model = testing::TinyModel(2);
      device_model->EnableCudaGraphs(static_shapes);
      std::unique_ptr<Drafter> drafters[2] = {std::make_unique<ModelDrafter>(std::move(device_model)),
                                              std::make_unique<testing::HostOnlyDrafter>(
                                                  std::make_unique<ModelDrafter>(testing::TinyModel(2)))};
      DraftTree drafts[2];
      for (int d = 0; d < 2; ++d) {
        ASSERT_TRUE(drafters[d]->Reset({1, 5, 3, 7, 2, 3, 1}, {}).ok());
        auto draft = BuildOnce(**builder, *drafters[d], {});
        ASSERT_TRUE(draft.ok()) << draft.status();
        drafts[d] = *std::move(draft);
      }
      EXPECT_EQ(drafters[0]->models()[0]->forward_counts(), drafters[1]->models()[0]->forward_counts());
      ASSERT_EQ(drafts[0].tree.size(), total);
      ASSERT_EQ(drafts[1].tree.size(), total);
      EXPECT_EQ(HostTokens(drafts[0]), HostTokens(drafts[1]));
      for (int i = 1; i < total; ++i) EXPECT_EQ(drafts[0].tree.parent(i), drafts[1].tree.parent(i)) << "node " << i;
    }
  }
}

// Without `depth` the tree grows the length policy's levels each step (an
// adaptive tree size): EAGLE-2's tree of that depth, or of the least depth
// whose pool holds total_tokens - 1 where the policy's is smaller.
TEST(DynamicTopKTreeBuilderTest, WithoutADepthGrowsThePolicysLevels) {
  auto builder = BuilderFromYaml("{type: dynamic_topk, top_k: 2, total_tokens: 9}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  EXPECT_EQ((*builder)->traits().length_control, LengthControl::kMaxLength);
  for (auto [gamma, depth] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{5, 5}}) {  // the pool needs 2 levels
    TableDrafter drafter(16, 11, /*scale=*/2.0);
    auto draft = BuildOnce(**builder, drafter, {.gamma = gamma});
    ASSERT_TRUE(draft.ok()) << draft.status();
    ASSERT_EQ(draft->tree.size(), 9);
    std::set<Path> paths;
    for (int i = 1; i < draft->tree.size(); ++i) paths.insert(draft->tree.PathTokens(i));
    EXPECT_EQ(paths, ReferenceTree(drafter, 1, 2, depth, 8)) << "gamma " << gamma;
    EXPECT_EQ(static_cast<int>(drafter.calls().size()), depth + 1) << "gamma " << gamma;
  }
  auto fixed = BuilderFromYaml("{type: dynamic_topk, top_k: 2, depth: 3, total_tokens: 9}");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ((*fixed)->traits().length_control, LengthControl::kNone);
}

TEST(DynamicTopKTreeBuilderTest, NeverFeedsAnIndexOfTheReturnedTree) {
  auto builder = BuilderFromYaml("{type: dynamic_topk, top_k: 3, depth: 3, total_tokens: 10}");
  ASSERT_TRUE(builder.ok());
  TableDrafter drafter(16, 2);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok());
  // The drafter must not mistake a returned node for a node it was fed (pruned_tree.h).
  for (const auto& [node, path] : drafter.fed_paths()) EXPECT_TRUE(node == 0 || node >= draft->tree.size()) << node;
}

TEST(DynamicTopKTreeBuilderTest, OptionErrorsNameFileLineAndKey) {
  EXPECT_THAT(BuilderFromYaml("type: dynamic_topk\ntop_k: 0\n", "d.yaml").status().message(),
              HasSubstr("d.yaml:2: key 'top_k'"));
  EXPECT_THAT(BuilderFromYaml("type: dynamic_topk\ntop_k: 2\ndepth: 1\ntotal_tokens: 8\n", "d.yaml").status().message(),
              HasSubstr("d.yaml:4: key 'total_tokens': expected a tree size in [2, 7]"));
  EXPECT_THAT(BuilderFromYaml("{type: dynamic_topk, depth: x}", "d.yaml").status().message(),
              HasSubstr("key 'depth': expected an integer"));
  EXPECT_THAT(BuilderFromYaml("{type: dynamic_topk, topk: 3}", "d.yaml").status().message(),
              HasSubstr("unknown key 'topk'"));
  auto wide = BuilderFromYaml("{type: dynamic_topk, top_k: 20, depth: 1, total_tokens: 10}");
  ASSERT_TRUE(wide.ok());
  TableDrafter drafter(16, 1);
  EXPECT_THAT(BuildOnce(**wide, drafter, {}).status().message(), HasSubstr("top_k = 20 exceeds"));
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
