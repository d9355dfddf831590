// verifiers::RecursiveRejectionWalk: the host arithmetic against a direct
// reading of the rule on a case worked by hand, and the CUDA kernels against
// the host arithmetic on random trees (the law itself: the rules' device
// tests, specinfer/, rrs/, rrs_wor/).
#include "algorithms/verifiers/common/recursive_rejection_device.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/verifiers/testing/random_tree_rows.h"
#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

using verifiers::SiblingRows;

at::Tensor Longs(std::vector<int64_t> values) { return at::tensor(values); }

// p = (0.5, 0.3, 0.2) at the root, whose children carry tokens 1 and 2 drawn
// from q = (0.2, 0.6, 0.2) without replacement. Child 1 (token 1): p/q = 0.5;
// its uniform 0.7 rejects it, and the residual is norm((p - q)+) = (1, 0, 0).
// Child 2 (token 2): masked q_2 = (0.5, 0, 0.5); p~(2) = 0 rejects it, and
// the residual stays (1, 0, 0), so the extra token is 0. With a uniform of 0.4
// child 1 is accepted; it is a leaf, so the extra token races p there.
TEST(RecursiveRejectionWalk, WorkedCaseOnTheHost) {
  const at::Tensor parents = Longs({-1, 0, 0}), tokens = Longs({0, 1, 2});
  const at::Tensor p = at::tensor({0.5f, 0.3f, 0.2f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f}).view({3, 3});
  const at::Tensor q = at::tensor({0.0f, 0.0f, 0.0f, 0.2f, 0.6f, 0.2f, 0.2f, 0.6f, 0.2f}).view({3, 3});
  const at::Tensor noise = at::ones({3});
  for (SiblingRows rows : {SiblingRows::kShared, SiblingRows::kSharedWithoutReplacement}) {
    const at::Tensor rejected =
        verifiers::RecursiveRejectionWalk(parents, tokens, p, q, at::tensor({0.0f, 0.7f, 0.1f}), noise, rows);
    EXPECT_TRUE(at::equal(rejected, Longs({0, 0, 0, 0}))) << rejected;
    const at::Tensor accepted =
        verifiers::RecursiveRejectionWalk(parents, tokens, p, q, at::tensor({0.0f, 0.4f, 0.1f}), noise, rows);
    EXPECT_TRUE(at::equal(accepted, Longs({1, 1, 0, 2}))) << accepted;  // p at node 1: one-hot on 2
  }
}

TEST(RecursiveRejectionWalk, CudaMatchesTheHost) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  int compared = 0, descended = 0;
  for (int64_t vocab : {7, 2049, 128256}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      const enumeration::RandomTreeRows c = enumeration::MakeRandomTreeRows(24, vocab, seed + vocab), d = c.Cuda();
      for (SiblingRows rows : {SiblingRows::kOwn, SiblingRows::kShared, SiblingRows::kSharedWithoutReplacement}) {
        const at::Tensor host =
            verifiers::RecursiveRejectionWalk(c.parents, c.tokens, c.p, c.q, c.uniforms, c.noise, rows);
        const at::Tensor cuda =
            verifiers::RecursiveRejectionWalk(d.parents, d.tokens, d.p, d.q, d.uniforms, d.noise, rows).cpu();
        EXPECT_TRUE(at::equal(host, cuda)) << "vocab " << vocab << " seed " << seed << "\n" << host << cuda;
        ++compared;
        descended += host[0].item<int64_t>() > 0;
      }
    }
  }
  EXPECT_EQ(compared, 36);
  EXPECT_GT(descended, 0);  // some walks accept drafts
}

}  // namespace
}  // namespace speclab
