// verifiers::TreeWalk (the tree rules' sample-then-match walk): its contract
// on the CPU, and the kernel (cuda/tree_walk.h) on CUDA against the CPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/verifiers/common/tree_on_device.h"
#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

at::Tensor Longs(const std::vector<int64_t>& v) { return at::tensor(v, at::kLong); }

TEST(TreeWalkOnDevice, TreeWalkDescendsIntoTheFirstMatchingChild) {
  //      0:t5
  //   1:t7  2:t7  3:t8
  //   4:t2        5:t2
  const at::Tensor parents = Longs({-1, 0, 0, 0, 1, 3}), tokens = Longs({5, 7, 7, 8, 2, 2});
  // y at node 0 is 7: node 1 (the first 7) is accepted, then y at node 1 is 2: node 4.
  EXPECT_TRUE(at::equal(verifiers::TreeWalk(parents, tokens, Longs({7, 2, 0, 0, 9, 0})), Longs({2, 1, 4, 0, 0, 0, 9})));
  // No child matches y at the root: nothing accepted, y at the root is the extra token.
  EXPECT_TRUE(at::equal(verifiers::TreeWalk(parents, tokens, Longs({3, 2, 0, 0, 9, 0})), Longs({0, 0, 0, 0, 0, 0, 3})));
  // Node 3, then a mismatch below it.
  EXPECT_TRUE(at::equal(verifiers::TreeWalk(parents, tokens, Longs({8, 0, 0, 4, 0, 0})), Longs({1, 3, 0, 0, 0, 0, 4})));
  EXPECT_THROW(verifiers::TreeWalk(parents, tokens, Longs({1, 2})), c10::Error);
}

TEST(TreeWalkOnDevice, CudaKernelMatchesTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(3);
  for (int64_t n : {1, 7, 84, 341, 1024}) {
    // A random tree: each node's parent an earlier node.
    std::vector<int64_t> parents{-1};
    for (int64_t i = 1; i < n; ++i) parents.push_back(at::randint(i, {1}, gen).item<int64_t>());
    // Walks with tokens and y drawn from a few values, so that matches are common.
    const at::Tensor tokens = at::randint(3, {n}, gen, at::TensorOptions().dtype(at::kLong));
    const at::Tensor y = at::randint(3, {n}, gen, at::TensorOptions().dtype(at::kLong));
    EXPECT_TRUE(at::equal(verifiers::TreeWalk(Longs(parents).cuda(), tokens.cuda(), y.cuda()).cpu(),
                          verifiers::TreeWalk(Longs(parents), tokens, y)))
        << "n " << n;
  }
}

}  // namespace
}  // namespace speclab
