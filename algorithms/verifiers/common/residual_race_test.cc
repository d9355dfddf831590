// verifiers::ResidualRace: the ATen formula on the CPU, the chunked kernel
// (cuda/residual_race.h) on CUDA, bit for bit against racing every row.
#include "algorithms/verifiers/common/residual_race.h"

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

struct ResidualCase {
  at::Tensor p, q, noise;
};

ResidualCase MakeResidualCase(int64_t cols, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto f = at::TensorOptions().dtype(at::kFloat);
  ResidualCase c{.p = at::rand({4, cols}, gen, f).pow_(4), .q = at::rand({4, cols}, gen, f).pow_(4)};
  c.p.div_(c.p.sum(1, true));
  c.q.div_(c.q.sum(1, true));
  c.q[2].copy_(c.p[1]);  // row 1 has no residual mass
  c.noise = at::empty({4, cols}, f).exponential_(1.0, gen);
  return c;
}

at::Tensor ResidualRaceByAllRows(const ResidualCase& c, int64_t row) {
  const int64_t last = c.p.size(0) - 1;
  at::Tensor stops = at::cat({(c.p.narrow(0, 0, last) - c.q.narrow(0, 1, last)).clamp_min(0), c.p.narrow(0, last, 1)});
  stops = at::where(stops.sum(1, true) > 0, stops, c.p);
  return at::div(stops, c.noise.clamp_min(FLT_MIN)).argmax(-1).narrow(0, row, 1);
}

TEST(ResidualRace, ResidualRaceIsTheRaceOfTheStoppingRow) {
  for (int64_t cols : {7, 8000}) {
    const ResidualCase c = MakeResidualCase(cols, static_cast<uint64_t>(cols));
    for (int64_t row = 0; row < 4; ++row) {
      const at::Tensor got = verifiers::ResidualRace(c.p, c.q, c.noise, at::tensor({row}, at::kLong));
      EXPECT_TRUE(at::equal(got, ResidualRaceByAllRows(c, row))) << "cols " << cols << ", row " << row;
    }
  }
  EXPECT_THROW(verifiers::ResidualRace(at::zeros({2, 3}), at::zeros({2, 4}), at::zeros({2, 3}), at::zeros({1}, at::kLong)),
               c10::Error);
}

TEST(ResidualRace, CudaResidualRaceMatchesAtenOnTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  for (int64_t cols : {7, 2049, 128256}) {
    const ResidualCase c = MakeResidualCase(cols, static_cast<uint64_t>(cols) + 1);
    for (int64_t row = 0; row < 4; ++row) {
      const at::Tensor got =
          verifiers::ResidualRace(c.p.cuda(), c.q.cuda(), c.noise.cuda(), at::tensor({row}, at::kLong).cuda()).cpu();
      EXPECT_TRUE(at::equal(got, ResidualRaceByAllRows(c, row))) << "cols " << cols << ", row " << row;
    }
  }
}

// The weighted race (block verification's stopping law) at every row, as
// racing every row's (w p - q)+ and keeping that one; CUDA bit for bit.
TEST(ResidualRace, WeightedResidualRaceIsTheRaceOfTheStoppingRow) {
  c10::InferenceMode guard;
  for (int64_t cols : {7, 8000, 128256}) {
    const ResidualCase c = MakeResidualCase(cols, static_cast<uint64_t>(cols) + 2);
    const at::Tensor weights = at::tensor({1.0f, 0.5f, 0.0f, 0.25f});  // row 2: no residual mass
    const int64_t last = c.p.size(0) - 1;
    at::Tensor stops = at::cat({(weights.narrow(0, 0, last).unsqueeze(1) * c.p.narrow(0, 0, last) -
                                 c.q.narrow(0, 1, last)).clamp_min(0),
                                c.p.narrow(0, last, 1)});
    stops = at::where(stops.sum(1, true) > 0, stops, c.p);
    const at::Tensor expected = at::div(stops, c.noise.clamp_min(FLT_MIN)).argmax(-1);
    for (int64_t row = 0; row <= last; ++row) {
      const at::Tensor r = at::tensor({row}, at::kLong);
      EXPECT_EQ(verifiers::ResidualRace(c.p, c.q, c.noise, r, weights).item<int64_t>(), expected[row].item<int64_t>())
          << "cols " << cols << ", row " << row;
      if (::speclab::testing::CudaTestsRequested() && at::hasCUDA()) {
        const int64_t launches = fused::CudaKernelLaunches();
        EXPECT_EQ(verifiers::ResidualRace(c.p.cuda(), c.q.cuda(), c.noise.cuda(), r.cuda(), weights.cuda()).item<int64_t>(),
                  expected[row].item<int64_t>())
            << "cuda, cols " << cols << ", row " << row;
        EXPECT_EQ(fused::CudaKernelLaunches() - launches, 1);
      }
    }
  }
}
}  // namespace
}  // namespace speclab
