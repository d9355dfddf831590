#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <queue>
#include <set>
#include <string>

#include "algorithms/tree_builders/testing/builder_harness.h"
#include "algorithms/tree_builders/testing/table_drafter.h"
#include "drafters/model/model_drafter.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/host_only_drafter.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::HasSubstr;
using Path = std::vector<int32_t>;

// The B best nodes of the infinite draft tree by score = Σ (log q + log decay),
// by exact best-first search (scores fall strictly along every path).
std::set<Path> TopNodes(const TableDrafter& drafter, int32_t root, int budget, double decay) {
  using Entry = std::pair<double, Path>;
  std::priority_queue<Entry> open;
  open.push({0.0, {root}});
  std::set<Path> out;
  bool first = true;
  while (static_cast<int>(out.size()) < budget && !open.empty()) {
    auto [score, path] = open.top();
    open.pop();
    if (!first) out.insert(path);
    first = false;
    at::Tensor logq = drafter.Logits(path).log_softmax(-1);
    for (int64_t x = 0; x < logq.size(0); ++x) {
      Path child = path;
      child.push_back(static_cast<int32_t>(x));
      open.push({score + std::log(decay) + logq[x].item<double>(), child});
    }
  }
  return out;
}

TEST(BestFirstTreeBuilderTest, FindsTheBudgetMostProbableNodes) {
  for (int budget : {1, 5, 12}) {
    // Wide enough to be exact: every open node expanded, every child proposed.
    auto builder = BuilderFromYaml("{type: best_first, budget: " + std::to_string(budget) +
                                   ", max_beam_len: 12, max_n_beams: 4096, max_branch_width: 8, min_log_prob: -1000}");
    ASSERT_TRUE(builder.ok()) << builder.status();
    EXPECT_FALSE((*builder)->traits().samples_tokens);
    TableDrafter drafter(8, 21, /*scale=*/2.0);
    auto draft = BuildOnce(**builder, drafter, {});
    ASSERT_TRUE(draft.ok()) << draft.status();
    EXPECT_EQ(draft->sampling, DraftSampling::kDeterministic);
    const TokenTree& tree = draft->tree;
    ASSERT_EQ(tree.size(), budget + 1);
    std::set<Path> paths;
    for (int i = 1; i < tree.size(); ++i) {
      EXPECT_LT(tree.parent(i), i);
      paths.insert(tree.PathTokens(i));
    }
    EXPECT_EQ(paths, TopNodes(drafter, 1, budget, 0.95)) << "budget " << budget;
    for (const auto& [node, path] : drafter.fed_paths()) EXPECT_TRUE(node == 0 || node > budget) << node;
  }
}

TEST(BestFirstTreeBuilderTest, RespectsBeamLimitsAndTheLengthPolicy) {
  auto builder = BuilderFromYaml("{type: best_first, budget: 20, max_n_beams: 2, max_branch_width: 3}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  TableDrafter drafter(16, 4);
  auto draft = BuildOnce(**builder, drafter, {.gamma = 3});  // max_beam_len defaults to the policy's 3
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_LE(drafter.calls().size(), 3u);
  for (const auto& call : drafter.calls()) EXPECT_LE(call.size(), 2u);
  EXPECT_LE(draft->tree.max_depth(), 3);
  EXPECT_LE(draft->tree.size(), 1 + 3 + 2 * 3 * 2);
  for (int i = 0; i < draft->tree.size(); ++i) EXPECT_LE(draft->tree.children(i).size(), 3u);
}

TEST(BestFirstTreeBuilderTest, MinLogProbStopsGrowthButKeepsTheRootsBestChild) {
  auto builder = BuilderFromYaml("{type: best_first, budget: 50, max_beam_len: 10, min_log_prob: -0.5}");
  ASSERT_TRUE(builder.ok());
  TableDrafter drafter(16, 4, /*scale=*/0.1);  // near-uniform q: every child scores about log(1/16)
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok());
  ASSERT_EQ(draft->tree.size(), 2);  // a step always drafts a token
  EXPECT_EQ(draft->tree.token(1), drafter.Logits({1}).argmax().item<int64_t>());
  EXPECT_EQ(drafter.calls().size(), 2u);  // the root's children, then the best child's (all dropped)
}

TEST(BestFirstTreeBuilderTest, KeepsExactlyTheBudgetAmongTies) {
  // Uniform q: the root's 16 children tie. As the reference's top-k, exactly
  // B join the tree (ties: the earlier, here the smaller id), and growth stops
  // when no grandchild beats them.
  auto builder = BuilderFromYaml("{type: best_first, budget: 5, max_beam_len: 4}");
  ASSERT_TRUE(builder.ok());
  TableDrafter drafter(16, 4, /*scale=*/0.0);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok());
  ASSERT_EQ(draft->tree.size(), 6);
  for (int i = 1; i <= 5; ++i) {
    EXPECT_EQ(draft->tree.parent(i), 0);
    EXPECT_EQ(draft->tree.token(i), i - 1);
  }
  EXPECT_EQ(drafter.calls().size(), 2u);
}

TEST(BestFirstTreeBuilderTest, LevelsOnTheDeviceGrowTheHostsTree) {
  // On CUDA the model drafter grows every iteration as a level of free
  // parents on the device (with static shapes, the body of the one CUDA
  // graph) and keeps the tree there, topped up to B + 1 nodes with copies of
  // node 1; behind testing::HostOnlyDrafter the host loop grows it. Same
  // nodes, same order. On the CPU both grow on the host (no read to save, and
  // the host loop stops early); tree_decoding_test's pipelined runs hold the
  // device form to it there, and best_first_growth_test its padding.
  struct Case {
    const char* yaml;
    int gamma;
  };
  const Case cases[] = {
      {"{type: best_first, budget: 6, max_beam_len: 3, max_branch_width: 4}", 4},
      {"{type: best_first, budget: 12, max_beam_len: 5, max_n_beams: 3, max_branch_width: 3}", 4},
      {"{type: best_first, budget: 10, max_branch_width: 5, decay_factor: 1, min_log_prob: -6}", 6},  // the policy's 6
      {"{type: best_first, budget: 40, max_beam_len: 3, max_branch_width: 2, min_log_prob: -4}", 4},  // fewer than B
      {"{type: best_first, budget: 8, max_beam_len: 4, max_branch_width: 16, min_log_prob: -0.01}", 4},  // 1 grows
  };
  const c10::Device device = testing::TestDevice();
  int padded = 0;
  for (bool static_shapes : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << c.yaml << (static_shapes ? " static" : ""));
      auto builder = BuilderFromYaml(c.yaml);
      ASSERT_TRUE(builder.ok()) << builder.status();
      std::unique_ptr<LlamaModel> device_model = testing::TinyModelOn(device, 2, 16, 2, /*logit_scale=*/4);
      device_model->EnableCudaGraphs(static_shapes);
      std::unique_ptr<Drafter> drafters[2] = {
          std::make_unique<ModelDrafter>(std::move(device_model)),
          std::make_unique<testing::HostOnlyDrafter>(
              std::make_unique<ModelDrafter>(testing::TinyModelOn(device, 2, 16, 2, /*logit_scale=*/4)))};
      DraftTree drafts[2];
      for (int d = 0; d < 2; ++d) {
        ASSERT_TRUE(drafters[d]->Reset({1, 5, 3, 7, 2, 3, 1}, {}).ok());
        auto draft = BuildOnce(**builder, *drafters[d], {.gamma = c.gamma});
        ASSERT_TRUE(draft.ok()) << draft.status();
        drafts[d] = *std::move(draft);
      }
      const TokenTree &grown = drafts[0].tree, &host = drafts[1].tree;
      const int budget = std::stoi(std::string(c.yaml).substr(std::string(c.yaml).find("budget: ") + 8));
      ASSERT_GE(host.size(), 2);
      if (!device.is_cuda()) {
        EXPECT_EQ(HostTokens(drafts[0]), HostTokens(drafts[1]));
        continue;
      }
      ASSERT_EQ(grown.size(), budget + 1);
      ASSERT_LE(host.size(), grown.size());
      EXPECT_EQ(HostTokens(drafts[0]), [&] {
        std::vector<int32_t> tokens = HostTokens(drafts[1]);
        tokens.resize(grown.size(), tokens[1]);
        return tokens;
      }());
      for (int i = 1; i < grown.size(); ++i)
        EXPECT_EQ(grown.parent(i), i < host.size() ? host.parent(i) : 0) << "node " << i;
      padded += host.size() < grown.size();
    }
  }
  if (device.is_cuda()) EXPECT_GE(padded, 4);  // the last two cases top the tree up
}

TEST(BestFirstTreeBuilderTest, OptionErrorsNameFileLineAndKey) {
  EXPECT_THAT(BuilderFromYaml("{type: best_first}", "b.yaml").status().message(),
              HasSubstr("b.yaml:1: key 'budget': missing required key"));
  EXPECT_THAT(BuilderFromYaml("type: best_first\nbudget: 8\ndecay_factor: 1.5\n", "b.yaml").status().message(),
              HasSubstr("b.yaml:3: key 'decay_factor'"));
  EXPECT_THAT(BuilderFromYaml("type: best_first\nbudget: 8\nmin_log_prob: 2\n", "b.yaml").status().message(),
              HasSubstr("b.yaml:3: key 'min_log_prob'"));
  EXPECT_THAT(BuilderFromYaml("type: best_first\nbudget: 8\nmax_beam_len: 0\n", "b.yaml").status().message(),
              HasSubstr("b.yaml:3: key 'max_beam_len'"));
  EXPECT_THAT(BuilderFromYaml("{type: best_first, budget: 8, beams: 3}", "b.yaml").status().message(),
              HasSubstr("unknown key 'beams'"));
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
