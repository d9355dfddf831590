// verifiers::RejectionAccepted: the ATen formula on the CPU and the kernel
// (cuda/rejection_kernels.h) on CUDA, against a loop over the drafts.
#include "algorithms/verifiers/rejection/rejection_accepted.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "framework/model/fused_ops.h"
#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

// Target and draft rows: four of `cols` tokens.
struct Rows {
  at::Tensor p, q;
};

Rows MakeRows(int64_t cols, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto f = at::TensorOptions().dtype(at::kFloat);
  Rows c{.p = at::rand({4, cols}, gen, f).pow_(4), .q = at::rand({4, cols}, gen, f).pow_(4)};
  c.p.div_(c.p.sum(1, true));
  c.q.div_(c.q.sum(1, true));
  return c;
}

// Rejection's accepted count: u chosen so that drafts 0..k-1 pass and draft k
// fails, for every k, against a loop over the drafts.
TEST(RejectionAccepted, RejectionAcceptedCountsTheLeadingAcceptances) {
  const Rows c = MakeRows(50, 3);
  const at::Tensor tokens = at::tensor(std::vector<int64_t>{0, 4, 9, 17}, at::kLong);
  for (int64_t fail = 0; fail <= 3; ++fail) {
    at::Tensor u = at::zeros({3});
    if (fail < 3) u[fail] = 1.0f + c.p[fail][tokens[fail + 1].item<int64_t>()].item<float>() /
                                       c.q[fail + 1][tokens[fail + 1].item<int64_t>()].item<float>();
    const at::Tensor got = verifiers::RejectionAccepted(tokens, c.p, c.q, u);
    EXPECT_EQ(got.item<int64_t>(), fail) << "fail at " << fail;
    if (::speclab::testing::CudaTestsRequested() && at::hasCUDA()) {
      const int64_t launches = fused::CudaKernelLaunches();
      EXPECT_EQ(verifiers::RejectionAccepted(tokens.cuda(), c.p.cuda(), c.q.cuda(), u.cuda()).item<int64_t>(), fail);
      EXPECT_EQ(fused::CudaKernelLaunches() - launches, 1);  // the kernel, not the ATen formula
    }
  }
  EXPECT_THROW(verifiers::RejectionAccepted(tokens, c.p, c.q, at::zeros({2})), c10::Error);
}
}  // namespace
}  // namespace speclab
