// tree_builders::BestInOrder and ExpandFrontier: their contracts on the CPU,
// and the kernels (cuda/frontier_kernels.h) on CUDA against the CPU.
#include "algorithms/tree_builders/common/top_k_frontier.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

at::Tensor Longs(const std::vector<int64_t>& v) { return at::tensor(v, at::kLong); }

TEST(FrontierOps, BestInOrderKeepsTheLargestTiesToTheSmallerIndex) {
  const at::Tensor scores = at::tensor({-1.0, 2.0, 0.5, 2.0, -0.0, 0.0, 0.5}, at::kDouble);
  EXPECT_TRUE(at::equal(tree_builders::BestInOrder(scores, 1), Longs({1})));
  EXPECT_TRUE(at::equal(tree_builders::BestInOrder(scores, 3), Longs({1, 2, 3})));
  EXPECT_TRUE(at::equal(tree_builders::BestInOrder(scores, 5), Longs({1, 2, 3, 4, 6})));  // -0 == +0: index 4 first
  EXPECT_THROW(tree_builders::BestInOrder(scores, 8), c10::Error);
  EXPECT_THROW(tree_builders::BestInOrder(scores.to(at::kFloat), 2), c10::Error);
}

TEST(FrontierOps, ExpandFrontierScoresChildrenAndKeepsTheBest) {
  // Two frontier nodes (pool entries 5 and 9), two children each, at pool offset 10.
  const at::Tensor top_scores = at::tensor({-0.5f, -1.0f, -0.25f, -2.0f}, at::kFloat).view({2, 2});
  const at::Tensor top_tokens = Longs({7, 8, 3, 4}).view({2, 2});
  const at::Tensor frontier_scores = at::tensor({-1.0, -1.25}, at::kDouble), frontier_pool = Longs({5, 9});
  const at::Tensor pool_tokens = at::zeros({14}, at::kLong), pool_parents = at::zeros({14}, at::kLong),
                   pool_scores = at::zeros({14}, at::kDouble);
  const tree_builders::Frontier next = tree_builders::ExpandFrontier(
      top_scores, top_tokens, frontier_scores, frontier_pool, pool_tokens, pool_parents, pool_scores, 10);
  // Children scored -1.5, -2.0, -1.5, -3.25: the two best tie, the earlier first; pool order.
  EXPECT_TRUE(at::equal(pool_tokens.narrow(0, 10, 4), Longs({7, 8, 3, 4})));
  EXPECT_TRUE(at::equal(pool_parents.narrow(0, 10, 4), Longs({5, 5, 9, 9})));
  EXPECT_TRUE(at::equal(pool_scores.narrow(0, 10, 4), at::tensor({-1.5, -2.0, -1.5, -3.25}, at::kDouble)));
  EXPECT_TRUE(at::equal(next.tokens, Longs({7, 3})));
  EXPECT_TRUE(at::equal(next.rows, Longs({0, 1})));
  EXPECT_TRUE(at::equal(next.scores, at::tensor({-1.5, -1.5}, at::kDouble)));
  EXPECT_TRUE(at::equal(next.pool, Longs({10, 12})));
  EXPECT_THROW(tree_builders::ExpandFrontier(top_scores, top_tokens, frontier_scores, frontier_pool, pool_tokens,
                                             pool_parents, pool_scores, 11),
               c10::Error);  // 11 + 4 > 14
}

TEST(FrontierOps, CudaKernelsMatchTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(3);
  for (int64_t n : {1, 7, 84, 341, 1024}) {
    // Many ties (rounded scores), a NaN and -inf among them.
    at::Tensor scores = at::randn({n}, gen, at::TensorOptions().dtype(at::kDouble)).mul_(3).round_();
    if (n > 3)
      scores[2] = std::numeric_limits<double>::quiet_NaN(), scores[3] = -std::numeric_limits<double>::infinity();
    for (int64_t count : {int64_t{1}, (n + 1) / 2, n}) {
      EXPECT_TRUE(
          at::equal(tree_builders::BestInOrder(scores.cuda(), count).cpu(), tree_builders::BestInOrder(scores, count)))
          << "n " << n << " count " << count;
    }
  }
  for (int64_t k : {1, 4, 10, 32}) {
    // Rounded scores: many ties.
    const at::Tensor top_scores = std::get<0>(at::randn({k, k}, gen).mul_(2).round_().sort(1, /*descending=*/true));
    const at::Tensor top_tokens = at::randint(100, {k, k}, gen, at::TensorOptions().dtype(at::kLong));
    const at::Tensor frontier_scores = at::randn({k}, gen, at::TensorOptions().dtype(at::kDouble)).round_();
    const at::Tensor frontier_pool = at::randint(50, {k}, gen, at::TensorOptions().dtype(at::kLong));
    const int64_t pool = 3 + k * k;
    at::Tensor pools[2][3];
    tree_builders::Frontier next[2];
    for (int d = 0; d < 2; ++d) {
      const c10::Device device = d == 0 ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA);
      pools[d][0] = at::zeros({pool}, at::TensorOptions().dtype(at::kLong).device(device));
      pools[d][1] = at::zeros({pool}, at::TensorOptions().dtype(at::kLong).device(device));
      pools[d][2] = at::zeros({pool}, at::TensorOptions().dtype(at::kDouble).device(device));
      next[d] = tree_builders::ExpandFrontier(top_scores.to(device), top_tokens.to(device), frontier_scores.to(device),
                                              frontier_pool.to(device), pools[d][0], pools[d][1], pools[d][2], 3);
    }
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(at::equal(pools[1][i].cpu(), pools[0][i])) << "k " << k << " pool " << i;
    EXPECT_TRUE(at::equal(next[1].tokens.cpu(), next[0].tokens)) << "k " << k;
    EXPECT_TRUE(at::equal(next[1].rows.cpu(), next[0].rows)) << "k " << k;
    EXPECT_TRUE(at::equal(next[1].scores.cpu(), next[0].scores)) << "k " << k;
    EXPECT_TRUE(at::equal(next[1].pool.cpu(), next[0].pool)) << "k " << k;
  }
}

}  // namespace
}  // namespace speclab
