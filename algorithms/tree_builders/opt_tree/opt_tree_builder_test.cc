#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/testing/builder_harness.h"
#include "algorithms/tree_builders/testing/table_drafter.h"
#include "drafters/model/model_drafter.h"
#include "framework/core/latency_profile.h"
#include "framework/core/options.h"
#include "framework/device/device_tree_builder.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/host_only_drafter.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::HasSubstr;
using Path = std::vector<int32_t>;

struct Weighted {
  Path path;
  double log_weight;  // Σ log q along the path
};

// OPT-Tree's levels written out on token paths: level 1 is the root's N most
// probable tokens; level d + 1 the N heaviest of level d's nodes' N most
// probable children (ties: the earlier). levels[d - 1] is level d.
std::vector<std::vector<Weighted>> ReferenceLevels(const TableDrafter& drafter, int32_t root, int n, int depth) {
  auto heaviest = [](std::vector<Weighted> v, size_t count) {
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.log_weight > b.log_weight; });
    v.resize(std::min(count, v.size()));
    return v;
  };
  std::vector<std::vector<Weighted>> levels;
  std::vector<Weighted> frontier = {{{root}, 0.0}};
  for (int d = 1; d <= depth; ++d) {
    std::vector<Weighted> children;
    for (const Weighted& parent : frontier) {
      auto [values, indices] = drafter.Logits(parent.path).log_softmax(-1).topk(n);
      for (int j = 0; j < n; ++j) {
        Path path = parent.path;
        path.push_back(static_cast<int32_t>(indices[j].item<int64_t>()));
        children.push_back({path, parent.log_weight + values[j].item<double>()});
      }
    }
    frontier = heaviest(children, n);
    levels.push_back(frontier);
  }
  return levels;
}

// The weights of the `count` heaviest nodes of levels 1..depth, heaviest first.
std::vector<Weighted> Heaviest(const std::vector<std::vector<Weighted>>& levels, int depth, int count) {
  std::vector<Weighted> all;
  for (int d = 0; d < depth; ++d) all.insert(all.end(), levels[d].begin(), levels[d].end());
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.log_weight > b.log_weight; });
  all.resize(std::min<size_t>(count, all.size()));
  return all;
}

double ExpectedAccepted(const std::vector<Weighted>& nodes) {
  double sum = 0;
  for (const Weighted& w : nodes) sum += std::exp(w.log_weight);
  return sum;
}

std::set<Path> Paths(const std::vector<Weighted>& nodes) {
  std::set<Path> out;
  for (const Weighted& w : nodes) out.insert(w.path);
  return out;
}

std::set<Path> Paths(const DraftTree& draft) {
  std::set<Path> out;
  for (int i = 1; i < draft.tree.size(); ++i) out.insert(draft.tree.PathTokens(i));
  return out;
}

void ExpectValidTree(const DraftTree& draft) {
  EXPECT_EQ(draft.sampling, DraftSampling::kDeterministic);
  for (int i = 1; i < draft.tree.size(); ++i) {
    EXPECT_LT(draft.tree.parent(i), i);
    EXPECT_EQ(draft.tree.token(i), HostTokens(draft)[i]);
  }
}

// The levels the threshold rule grows: while a level adds more than
// `threshold` to the weight of the n heaviest nodes, up to max_depth.
int ThresholdDepth(const std::vector<std::vector<Weighted>>& levels, int n, double threshold, int max_depth) {
  int depth = 1;
  for (double previous = 0; depth < max_depth; ++depth) {
    const double weight = ExpectedAccepted(Heaviest(levels, depth, n));
    if (weight - previous <= threshold) break;
    previous = weight;
  }
  return depth;
}

// The threshold rule: grow while a level adds more than δ to the weight of
// the N heaviest nodes; keep those N. One forward per level grown.
TEST(OptTreeBuilderTest, GrowsWhileALevelAddsMoreThanTheThreshold) {
  for (auto [n, threshold, max_depth] : {std::tuple{3, 0.05, 8}, std::tuple{6, 0.2, 8}, std::tuple{4, 0.0, 5},
                                         std::tuple{5, 10.0, 6}}) {
    SCOPED_TRACE(::testing::Message() << "n " << n << " threshold " << threshold);
    auto builder = BuilderFromYaml(absl::StrCat("{type: opt_tree, nodes: ", n, ", threshold: ", threshold,
                                                ", max_depth: ", max_depth, "}"));
    ASSERT_TRUE(builder.ok()) << builder.status();
    EXPECT_FALSE((*builder)->traits().samples_tokens);
    EXPECT_EQ((*builder)->traits().length_control, LengthControl::kNone);
    TableDrafter drafter(16, 7, /*scale=*/2.5);
    auto draft = BuildOnce(**builder, drafter, {});
    ASSERT_TRUE(draft.ok()) << draft.status();
    ExpectValidTree(*draft);

    const auto levels = ReferenceLevels(drafter, 1, n, max_depth);
    const int depth = ThresholdDepth(levels, n, threshold, max_depth);
    ASSERT_EQ(draft->tree.size(), n + 1);
    EXPECT_EQ(Paths(*draft), Paths(Heaviest(levels, depth, n)));
    EXPECT_EQ(static_cast<int>(drafter.calls().size()), depth);
    for (size_t i = 1; i < drafter.calls().size(); ++i) EXPECT_EQ(static_cast<int>(drafter.calls()[i].size()), n);
    if (threshold >= 10) EXPECT_EQ(depth, 1) << "no level adds 10 tokens";
    if (threshold == 0) EXPECT_GT(depth, 2) << "a case that grows several levels";
  }
}

TEST(OptTreeBuilderTest, LevelsOnTheDeviceGrowTheHostsTree) {
  // On CUDA the model drafter grows the levels on the device (with static
  // shapes, the body of one CUDA graph that skips the levels past the stop)
  // and keeps the tree there; behind testing::HostOnlyDrafter the host loop
  // grows it. Same nodes, same order; the forwards of N nodes that ran are
  // the host's where a graph skips them, every level's otherwise. On the CPU
  // both grow on the host (no read to save, and the host loop stops early);
  // tree_decoding_test's pipelined runs hold the device form to it there.
  struct Case {
    int nodes;
    double threshold;
    int max_depth;  // 0: the length policy's gamma
  };
  const Case cases[] = {{4, 0.0, 4}, {8, 0.2, 6}, {10, 0.1, 0}, {3, 2.0, 5}, {12, 0.01, 4}, {6, 0.0, 3}, {5, 0.0, 3}};
  const c10::Device device = testing::TestDevice();
  int stopped_early = 0, full_depth = 0;
  for (bool static_shapes : {false, true}) {
    for (const Case& c : cases) {
      const int depth = c.max_depth > 0 ? c.max_depth : 5;
      const std::string yaml = absl::StrCat("{type: opt_tree, nodes: ", c.nodes, ", threshold: ", c.threshold,
                                            c.max_depth > 0 ? absl::StrCat(", max_depth: ", c.max_depth) : "", "}");
      SCOPED_TRACE(::testing::Message() << yaml << (static_shapes ? " static" : ""));
      auto builder = BuilderFromYaml(yaml);
      ASSERT_TRUE(builder.ok()) << builder.status();
      ASSERT_NE(DeviceFormOf(**builder), nullptr);
      std::unique_ptr<LlamaModel> models[2] = {testing::TinyModelOn(device, 2, 16, 2, /*logit_scale=*/12),
                                               testing::TinyModelOn(device, 2, 16, 2, /*logit_scale=*/12)};
      models[0]->EnableCudaGraphs(static_shapes);
      LanguageModel* counted[2] = {models[0].get(), models[1].get()};
      std::unique_ptr<Drafter> drafters[2] = {
          std::make_unique<ModelDrafter>(std::move(models[0])),
          std::make_unique<testing::HostOnlyDrafter>(std::make_unique<ModelDrafter>(std::move(models[1])))};
      DraftTree drafts[2];
      for (int d = 0; d < 2; ++d) {
        ASSERT_TRUE(drafters[d]->Reset({1, 5, 3, 7, 2, 3, 1}, {}).ok());
        counted[d]->ResetForwardCounts();
        auto draft = BuildOnce(**builder, *drafters[d], {.gamma = depth});
        ASSERT_TRUE(draft.ok()) << draft.status();
        drafts[d] = *std::move(draft);
      }
      ASSERT_EQ(drafts[0].tree.size(), c.nodes + 1);
      ASSERT_EQ(drafts[1].tree.size(), c.nodes + 1);
      EXPECT_EQ(HostTokens(drafts[0]), HostTokens(drafts[1]));
      for (int i = 1; i < drafts[0].tree.size(); ++i)
        EXPECT_EQ(drafts[0].tree.parent(i), drafts[1].tree.parent(i)) << "node " << i;
      // Forwards of N nodes: the host fed d - 1 of them, stopping at depth d;
      // the device form (so these counts show it ran) all of max_depth's
      // unless its graph skips those past the stop.
      const int64_t host_levels = counted[1]->forward_counts()[c.nodes];
      const bool every_level = device.is_cuda() && !static_shapes;
      EXPECT_EQ(counted[0]->forward_counts()[c.nodes], every_level ? depth - 1 : host_levels);
      stopped_early += host_levels < depth - 1;
      full_depth += host_levels == depth - 1;
    }
  }
  EXPECT_EQ(stopped_early, 10) << "cases that stop before max_depth";
  EXPECT_EQ(full_depth, 4) << "cases that grow every level";
}

TEST(OptTreeBuilderTest, ALatencyProfileGrowsOnTheHost) {
  // The profile prices the target by the nodes kept; a device tree has a
  // fixed size, so the rule runs on the host, and the pipelined engine is
  // told so (BuildAt: Unimplemented).
  auto builder = BuilderFromYaml("{type: opt_tree, nodes: 4, max_depth: 4, latency_profile: {budgets: [1, 5], "
                                 "target_ms: [1.0, 1.2], draft_ms: 0.1}}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  ModelDrafter drafter(testing::TinyModel(2, 16, 2, /*logit_scale=*/4));
  ASSERT_TRUE(drafter.Reset({1, 5, 3, 7, 2, 3, 1}, {}).ok());
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok()) << draft.status();
  ExpectValidTree(*draft);
  DeviceTreeBuilder* device_form = DeviceFormOf(**builder);
  ASSERT_NE(device_form, nullptr);
  const BuildRequest request{.root_token = 1};
  EXPECT_THAT(device_form->BuildAt(drafter, request, DeviceRoot{}).status().message(),
              HasSubstr("only by its threshold"));
}

// With a latency profile the tree is the (n, d) of best rate
// (1 + E_{n,d}) / (d·t_draft + t_target(n + 1)), grown while a level raises it.
TEST(OptTreeBuilderTest, ALatencyProfileChoosesTheTreeOfBestRate) {
  struct Case {
    const char* profile;
    const char* expect;  // what the profile should lead to, beyond the reference
  };
  for (const Case& c : {Case{"{budgets: [1, 64], target_ms: [10, 10], draft_ms: 0}", "all"},
                        Case{"{budgets: [1, 2, 64], target_ms: [10, 11, 200], draft_ms: 1}", "some"},
                        Case{"{budgets: [1, 64], target_ms: [1, 1], draft_ms: 1000}", "none"}}) {
    SCOPED_TRACE(c.profile);
    constexpr int kNodes = 6, kMaxDepth = 6;
    auto builder = BuilderFromYaml(absl::StrCat("{type: opt_tree, nodes: ", kNodes, ", max_depth: ", kMaxDepth,
                                                ", latency_profile: ", c.profile, "}"));
    ASSERT_TRUE(builder.ok()) << builder.status();
    TableDrafter drafter(16, 3, /*scale=*/2.5);
    auto draft = BuildOnce(**builder, drafter, {});
    ASSERT_TRUE(draft.ok()) << draft.status();
    ExpectValidTree(*draft);

    Options spec = *Options::FromString(absl::StrCat("{latency_profile: ", c.profile, "}"), "p.yaml");
    const LatencyProfile profile = *ReadLatencyProfile(spec);
    const auto levels = ReferenceLevels(drafter, 1, kNodes, kMaxDepth);
    double best_rate = 1 / profile.TargetMs(1);
    int best_n = 0, best_d = 0, depth = 1;
    for (; depth <= kMaxDepth; ++depth) {
      double level_best = 0;
      for (int n = 1; n <= kNodes; ++n) {
        const double rate = (1 + ExpectedAccepted(Heaviest(levels, depth, n))) /
                            (depth * profile.draft_ms + profile.TargetMs(n + 1));
        if (rate > level_best && rate > best_rate) level_best = rate, best_n = n, best_d = depth;
      }
      if (level_best == 0) break;
      best_rate = level_best;
    }
    EXPECT_EQ(static_cast<int>(drafter.calls().size()), std::min(depth, kMaxDepth));
    ASSERT_EQ(draft->tree.size(), best_n + 1);
    if (best_n > 0) EXPECT_EQ(Paths(*draft), Paths(Heaviest(levels, best_d, best_n)));
    const std::string expect = c.expect;
    if (expect == "all") EXPECT_EQ(draft->tree.size(), kNodes + 1) << "a free target keeps every node";
    if (expect == "some") EXPECT_LT(draft->tree.size(), kNodes + 1) << "a steep target cost trims the tree";
    if (expect == "some") EXPECT_GT(draft->tree.size(), 1);
    if (expect == "none") EXPECT_EQ(draft->tree.size(), 1) << "a costly drafter: the root alone";
  }
}

// Without max_depth each step grows at most the length policy's levels.
TEST(OptTreeBuilderTest, WithoutAMaxDepthFollowsTheLengthPolicy) {
  auto builder = BuilderFromYaml("{type: opt_tree, nodes: 4, threshold: 0}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  EXPECT_EQ((*builder)->traits().length_control, LengthControl::kMaxLength);
  for (int gamma : {1, 3, 5}) {
    TableDrafter drafter(16, 11, /*scale=*/2.0);
    auto draft = BuildOnce(**builder, drafter, {.gamma = gamma});
    ASSERT_TRUE(draft.ok()) << draft.status();
    const auto levels = ReferenceLevels(drafter, 1, 4, gamma);
    const int depth = ThresholdDepth(levels, 4, 0, gamma);
    EXPECT_EQ(static_cast<int>(drafter.calls().size()), depth);
    EXPECT_EQ(Paths(*draft), Paths(Heaviest(levels, depth, 4))) << gamma;
    if (gamma > 1) EXPECT_GT(depth, 1) << "a drafter that grows past the first level";
  }
}

TEST(OptTreeBuilderTest, NeverFeedsAnIndexOfTheReturnedTree) {
  auto builder = BuilderFromYaml("{type: opt_tree, nodes: 5, threshold: 0, max_depth: 4}");
  ASSERT_TRUE(builder.ok());
  TableDrafter drafter(16, 2);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok());
  // The drafter must not mistake a returned node for a node it was fed (pruned_tree.h).
  for (const auto& [node, path] : drafter.fed_paths()) EXPECT_TRUE(node == 0 || node >= draft->tree.size()) << node;
}

TEST(OptTreeBuilderTest, OptionErrorsNameFileLineAndKey) {
  EXPECT_THAT(BuilderFromYaml("type: opt_tree\nnodes: 0\n", "o.yaml").status().message(),
              HasSubstr("o.yaml:2: key 'nodes': expected a number of drafted nodes in [1, 1024]"));
  EXPECT_THAT(BuilderFromYaml("type: opt_tree\nthreshold: -1\n", "o.yaml").status().message(),
              HasSubstr("o.yaml:2: key 'threshold'"));
  EXPECT_THAT(BuilderFromYaml("type: opt_tree\nthreshold: .nan\n", "o.yaml").status().message(),
              HasSubstr("o.yaml:2: key 'threshold'"));
  EXPECT_THAT(BuilderFromYaml("type: opt_tree\nmax_depth: 65\n", "o.yaml").status().message(),
              HasSubstr("o.yaml:2: key 'max_depth': expected an integer in [1, 64]"));
  EXPECT_THAT(BuilderFromYaml("{type: opt_tree, threshold: 0.5, latency_profile: {budgets: [1], target_ms: [1], "
                              "draft_ms: 0}}", "o.yaml").status().message(),
              HasSubstr("key 'threshold': give either 'threshold' or a latency profile"));
  EXPECT_THAT(BuilderFromYaml("{type: opt_tree, latency_profile: {budgets: [1, 2], target_ms: [1], draft_ms: 0}}",
                              "o.yaml").status().message(),
              HasSubstr("target_ms': expected one time per budget"));
  EXPECT_THAT(BuilderFromYaml("{type: opt_tree, latency_profile_file: /nonexistent.yaml}", "o.yaml")
                  .status().message(),
              HasSubstr("key 'latency_profile_file'"));
  EXPECT_THAT(BuilderFromYaml("{type: opt_tree, node: 3}", "o.yaml").status().message(),
              HasSubstr("unknown key 'node'"));
  auto wide = BuilderFromYaml("{type: opt_tree, nodes: 20, max_depth: 2}");
  ASSERT_TRUE(wide.ok());
  TableDrafter drafter(16, 1);
  EXPECT_THAT(BuildOnce(**wide, drafter, {}).status().message(), HasSubstr("nodes = 20 exceeds"));
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
