// fused::ArgmaxRows, fused::SoftmaxRows, fused::ResidualRace and the chain
// rules' counts (RejectionAccepted, BlockAccepted): the ATen formula on the
// CPU, the chunked kernels (cuda/row_kernels.h) on CUDA, checked against ATen
// on the CPU: bit for bit for argmax (ties, NaN, -inf, the divisor form), to
// float64 within the bound of float32 arithmetic for softmax
// (SoftmaxTolerance).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <limits>
#include <string>
#include <vector>

#include "framework/core/float_bounds.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"
#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

using float_bounds::Gamma;
using float_bounds::kFloat32Roundoff;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Relative error of each entry of a float32 softmax of x / T against the exact
// one: the shifted argument x / T - max carries up to 2u |x / T - max| (the
// division and the subtraction), exp adds 2 ulps (4u), the normaliser's sum of
// positive terms gamma(cols), the final division u.
double SoftmaxTolerance(const at::Tensor& x, double temperature) {
  const at::Tensor finite = x.masked_select(x.isfinite());
  const double span = finite.numel() == 0 ? 0.0 : (finite.max() - finite.min()).item<double>() / temperature;
  return Gamma(x.size(-1), kFloat32Roundoff) + (2 * span + 5) * kFloat32Roundoff;
}

// Rows that probe the argmax's edge cases, whatever the width: random
// values; the row maximum repeated in later chunks (the first must win); a
// NaN after the maximum (NaN wins); -inf everywhere but one entry; all -inf.
at::Tensor HardRows(int64_t rows, int64_t cols, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor x = at::randn({rows, cols}, gen, at::TensorOptions().dtype(at::kFloat));
  for (int64_t r = 0; r < rows; ++r) {
    at::Tensor row = x[r];
    switch (r % 5) {
      case 1:
        row.fill_(0.5f);
        if (cols > 3) row[cols / 3] = 2.0f, row[cols - 1] = 2.0f;
        break;
      case 2:
        row[cols / 2] = std::numeric_limits<float>::quiet_NaN();
        break;
      case 3:
        row.fill_(-kInf);
        row[cols - 1] = -3.0f;
        break;
      case 4:
        row.fill_(-kInf);
        break;
      default:
        break;
    }
  }
  return x;
}

TEST(FusedRowOps, CpuIsTheAtenFormula) {
  const at::Tensor x = HardRows(5, 300, 1);
  const at::Tensor d = at::rand({5, 300}).mul_(2);
  d[0][7] = 0.0f;  // clamped to FLT_MIN
  EXPECT_TRUE(at::equal(fused::ArgmaxRows(x), x.argmax(-1)));
  EXPECT_TRUE(at::equal(fused::ArgmaxRows(x, d), at::div(x, d.clamp_min(FLT_MIN)).argmax(-1)));
  const at::Tensor finite = at::randn({3, 300});
  EXPECT_TRUE(at::equal(fused::SoftmaxRows(finite), finite.softmax(-1)));
  EXPECT_TRUE(at::equal(fused::SoftmaxRows(finite, 0.7), (finite / 0.7).softmax(-1)));
  EXPECT_THROW(fused::SoftmaxRows(finite, 0.0), c10::Error);
  EXPECT_THROW(fused::ArgmaxRows(at::zeros({4})), c10::Error);
  EXPECT_THROW(fused::ArgmaxRows(x, at::zeros({5, 3})), c10::Error);
  EXPECT_THROW(fused::SoftmaxRows(at::zeros({2, 3, 4})), c10::Error);
}

TEST(FusedRowOps, CudaArgmaxMatchesAtenOnTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  for (int64_t cols : {1, 7, 2048, 2049, 8000, 128256}) {
    for (int64_t rows : {1, 5, 16}) {
      const at::Tensor x = HardRows(rows, cols, static_cast<uint64_t>(cols * 31 + rows));
      const at::Tensor d = at::rand({rows, cols}).mul_(2);
      d[0][0] = 0.0f;
      const std::string where = "rows " + std::to_string(rows) + ", cols " + std::to_string(cols);
      EXPECT_TRUE(at::equal(fused::ArgmaxRows(x.cuda()).cpu(), x.argmax(-1))) << where;
      EXPECT_TRUE(at::equal(fused::ArgmaxRows(x.cuda(), d.cuda()).cpu(), at::div(x, d.clamp_min(FLT_MIN)).argmax(-1)))
          << where << " (divisor)";
    }
  }
}

TEST(FusedRowOps, CudaSoftmaxMatchesFloat64) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  for (int64_t cols : {1, 7, 2048, 2049, 8000, 128256}) {
    for (int64_t rows : {1, 5, 16}) {
      const std::string where = "rows " + std::to_string(rows) + ", cols " + std::to_string(cols);
      at::Tensor x = at::randn({rows, cols}).mul_(4);
      if (cols > 2) x[0][1] = -kInf;  // a top-k-masked entry
      for (double temperature : {1.0, 0.6}) {
        const at::Tensor got = fused::SoftmaxRows(x.cuda(), temperature).cpu();
        const at::Tensor want = (x / temperature).to(at::kDouble).softmax(-1);
        const double rel = ((got.to(at::kDouble) - want).abs() / want.clamp_min(DBL_MIN)).max().item<double>();
        EXPECT_LE(rel, SoftmaxTolerance(x, temperature)) << where << " T=" << temperature;
        if (cols > 2) EXPECT_EQ(got[0][1].item<float>(), 0.0f) << where;
      }
    }
  }
  const at::Tensor all_masked = at::full({2, 5000}, -kInf);
  EXPECT_TRUE(fused::SoftmaxRows(all_masked.cuda()).isnan().all().item<bool>());
}

// Chain rejection's stopping race at every row, as racing all rows' residuals
// (p itself where the residual has no mass) and keeping that row: rows 0..2
// random laws, row 1's successor equal to row 1 (no residual mass), the last
// row raced on p.
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

TEST(FusedRowOps, ResidualRaceIsTheRaceOfTheStoppingRow) {
  for (int64_t cols : {7, 8000}) {
    const ResidualCase c = MakeResidualCase(cols, static_cast<uint64_t>(cols));
    for (int64_t row = 0; row < 4; ++row) {
      const at::Tensor got = fused::ResidualRace(c.p, c.q, c.noise, at::tensor({row}, at::kLong));
      EXPECT_TRUE(at::equal(got, ResidualRaceByAllRows(c, row))) << "cols " << cols << ", row " << row;
    }
  }
  EXPECT_THROW(fused::ResidualRace(at::zeros({2, 3}), at::zeros({2, 4}), at::zeros({2, 3}), at::zeros({1}, at::kLong)),
               c10::Error);
}

// Rejection's accepted count: u chosen so that drafts 0..k-1 pass and draft k
// fails, for every k, against a loop over the drafts.
TEST(FusedRowOps, RejectionAcceptedCountsTheLeadingAcceptances) {
  const ResidualCase c = MakeResidualCase(50, 3);
  const at::Tensor tokens = at::tensor(std::vector<int64_t>{0, 4, 9, 17}, at::kLong);
  for (int64_t fail = 0; fail <= 3; ++fail) {
    at::Tensor u = at::zeros({3});
    if (fail < 3) u[fail] = 1.0f + c.p[fail][tokens[fail + 1].item<int64_t>()].item<float>() /
                                       c.q[fail + 1][tokens[fail + 1].item<int64_t>()].item<float>();
    const at::Tensor got = fused::RejectionAccepted(tokens, c.p, c.q, u);
    EXPECT_EQ(got.item<int64_t>(), fail) << "fail at " << fail;
    if (::speclab::testing::CudaTestsRequested() && at::hasCUDA()) {
      const int64_t launches = fused::CudaKernelLaunches();
      EXPECT_EQ(fused::RejectionAccepted(tokens.cuda(), c.p.cuda(), c.q.cuda(), u.cuda()).item<int64_t>(), fail);
      EXPECT_EQ(fused::CudaKernelLaunches() - launches, 1);  // the kernel, not the ATen formula
    }
  }
  EXPECT_THROW(fused::RejectionAccepted(tokens, c.p, c.q, at::zeros({2})), c10::Error);
}

TEST(FusedRowOps, CudaResidualRaceMatchesAtenOnTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  for (int64_t cols : {7, 2049, 128256}) {
    const ResidualCase c = MakeResidualCase(cols, static_cast<uint64_t>(cols) + 1);
    for (int64_t row = 0; row < 4; ++row) {
      const at::Tensor got =
          fused::ResidualRace(c.p.cuda(), c.q.cuda(), c.noise.cuda(), at::tensor({row}, at::kLong).cuda()).cpu();
      EXPECT_TRUE(at::equal(got, ResidualRaceByAllRows(c, row))) << "cols " << cols << ", row " << row;
    }
  }
}

// Block verification's stopping point against the rule written out in
// float64 (docs/algorithms.md §1.9): w_i = min(1, w_{i-1} p/q), h_i = m_i / (m_i +
// 1 - w_i), h_gamma = w_gamma; u placed so that position t is the last to
// succeed, for every t. Rows of 6 positions, one with q = p (no residual
// mass), on the CPU and, where requested, on CUDA.
struct BlockCase {
  at::Tensor tokens, p, q;
  std::vector<double> w, h;      // w_0..w_gamma; h_1..h_gamma (h[0] unused)
  std::vector<double> log_span;  // sum_{j <= i} |log(p_{j-1}[x_j] / q_j[x_j])|, i = 0..gamma
};

BlockCase MakeBlockCase(int64_t cols, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const auto f = at::TensorOptions().dtype(at::kFloat);
  constexpr int64_t kRows = 6, kGamma = kRows - 1;
  // Drafts likely under both laws (the largest p_{i-1} q_i), so that the
  // weights stay away from 0, but for the last (the largest q_i / p_{i-1}),
  // so that h_gamma = w_gamma is below 1; row 3 has no residual mass (q_3 = p_2).
  BlockCase c{.p = at::rand({kRows, cols}, gen, f).pow_(3), .q = at::rand({kRows, cols}, gen, f).pow_(3)};
  c.p.div_(c.p.sum(1, true));
  c.q.div_(c.q.sum(1, true));
  c.q[3].copy_(c.p[2]);
  c.tokens = at::cat({at::zeros({1}, at::kLong), (c.p.narrow(0, 0, kGamma) * c.q.narrow(0, 1, kGamma)).argmax(1)});
  c.tokens[kGamma] = (c.q[kGamma] / c.p[kGamma - 1]).argmax();
  const auto p = c.p.accessor<float, 2>();
  const auto q = c.q.accessor<float, 2>();
  c.w = {1.0};
  c.h = {1.0};
  c.log_span = {0.0};
  for (int64_t i = 1; i <= kGamma; ++i) {
    const int64_t x = c.tokens[i].item<int64_t>();
    const double ratio = static_cast<double>(p[i - 1][x]) / q[i][x];
    c.w.push_back(std::min(1.0, c.w.back() * ratio));
    c.log_span.push_back(c.log_span.back() + std::abs(std::log(ratio)));
  }
  for (int64_t i = 1; i < kGamma; ++i) {
    double mass = 0;
    for (int64_t v = 0; v < cols; ++v) mass += std::max(0.0, c.w[i] * p[i][v] - static_cast<double>(q[i + 1][v]));
    const double denominator = mass + 1 - c.w[i];
    c.h.push_back(denominator > 0 ? mass / denominator : 1.0);
  }
  c.h.push_back(c.w[kGamma]);
  return c;
}

TEST(FusedRowOps, BlockAcceptedIsTheLastSuccessfulPosition) {
  c10::InferenceMode guard;
  for (int64_t cols : {9, 8000, 128256}) {
    int checked = 0;
    // Random cases until three stopping points have been checked (a wide
    // vocabulary's h is often too close to 1 for the bound below to call it).
    for (uint64_t seed = cols; checked < 3 && seed < static_cast<uint64_t>(cols) + 8; ++seed) {
      const BlockCase c = MakeBlockCase(cols, seed);
      const int64_t gamma = c.p.size(0) - 1;
      // The float32 arithmetic against the float64 case. A weight is the exp of
      // a running sum of log ratios (the CPU form; the kernel's product of
      // ratios is within less): its relative error is the sum's absolute error,
      // (gamma(gamma) + 4u) times the sum of |log ratio| (each log's rounding
      // and ulps, the cumulative sum), plus 6u (the ratio, exp, the shift by
      // the running maximum). h_i's residual mass is a sum of non-negative
      // terms over the vocabulary, so h is within 2 gamma(cols) plus the
      // weight's error, relatively. A stopping point is tested only where the
      // uniforms (h / 2 below, (1 + h) / 2 above) stay clear of that.
      const double u32 = kFloat32Roundoff;
      auto weight_error = [&](int64_t i) { return (Gamma(gamma, u32) + 4 * u32) * c.log_span[i] + 6 * u32; };
      const double h_error = 2 * Gamma(cols, u32) + 2 * weight_error(gamma);
      for (int64_t t = 0; t <= gamma; ++t) {
        // Positions after t fail (u above h), t succeeds (u below h).
        bool feasible = t == 0 || c.h[t] > 0;
        at::Tensor u = at::zeros({gamma});
        for (int64_t i = 1; i <= gamma; ++i) {
          if (i > t) {
            feasible = feasible && (1 - c.h[i]) / 2 > h_error * c.h[i] + u32;  // u is a float
            u[i - 1] = static_cast<float>((c.h[i] + 1) / 2);
          } else {
            u[i - 1] = static_cast<float>(i == t ? c.h[i] / 2 : 0.5);
          }
        }
        if (!feasible) continue;
        ++checked;
        SCOPED_TRACE(::testing::Message() << "cols " << cols << ", last success " << t);
        for (const bool cuda : {false, true}) {
          if (cuda && !(::speclab::testing::CudaTestsRequested() && at::hasCUDA())) continue;
          const auto device = cuda ? at::Device(at::kCUDA) : at::Device(at::kCPU);
          const int64_t launches = fused::CudaKernelLaunches();
          auto [tau, weights] = fused::BlockAccepted(c.tokens.to(device), c.p.to(device), c.q.to(device), u.to(device));
          EXPECT_EQ(fused::CudaKernelLaunches() - launches,
                    cuda ? 1 : 0);  // the kernels, not the ATen formula
          EXPECT_EQ(tau.item<int64_t>(), t) << (cuda ? "cuda" : "cpu");
          for (int64_t i = 0; i <= gamma; ++i) EXPECT_NEAR(weights[i].item<float>(), c.w[i], weight_error(i) * c.w[i]);
        }
      }
    }
    EXPECT_GE(checked, 3) << "cols " << cols;
  }
  const BlockCase c = MakeBlockCase(9, 1);
  EXPECT_THROW(fused::BlockAccepted(c.tokens, c.p, c.q, at::zeros({4})), c10::Error);
  EXPECT_THROW(fused::BlockAccepted(c.tokens.narrow(0, 0, 1), c.p.narrow(0, 0, 1), c.q.narrow(0, 0, 1), at::zeros({0})),
               c10::Error);
}

// The weighted race (block verification's stopping law) at every row, as
// racing every row's (w p - q)+ and keeping that one; CUDA bit for bit.
TEST(FusedRowOps, WeightedResidualRaceIsTheRaceOfTheStoppingRow) {
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
      EXPECT_EQ(fused::ResidualRace(c.p, c.q, c.noise, r, weights).item<int64_t>(), expected[row].item<int64_t>())
          << "cols " << cols << ", row " << row;
      if (::speclab::testing::CudaTestsRequested() && at::hasCUDA()) {
        const int64_t launches = fused::CudaKernelLaunches();
        EXPECT_EQ(fused::ResidualRace(c.p.cuda(), c.q.cuda(), c.noise.cuda(), r.cuda(), weights.cuda()).item<int64_t>(),
                  expected[row].item<int64_t>())
            << "cuda, cols " << cols << ", row " << row;
        EXPECT_EQ(fused::CudaKernelLaunches() - launches, 1);
      }
    }
  }
}

TEST(FusedRowOps, TopKLogSoftmaxRanksByValueThenIndex) {
  const at::Tensor x = at::tensor({1.0f, 3.0f, 3.0f, 0.0f, 3.0f, -kInf}, at::kFloat).view({1, 6});
  auto [values, indices] = fused::TopKLogSoftmax(x, 4);
  EXPECT_TRUE(at::equal(indices, at::tensor({1, 2, 4, 0}, at::kLong).view({1, 4}))) << indices;
  EXPECT_TRUE(at::equal(values, x.log_softmax(-1).index_select(1, indices[0])));  // the CPU form is this formula
  EXPECT_THROW(fused::TopKLogSoftmax(x, 7), c10::Error);
}

TEST(FusedRowOps, CudaTopKLogSoftmaxMatchesAtenOnTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  for (int64_t cols : {40, 300, 8000, 40000}) {
    const at::Tensor x = HardRows(6, cols, 11);
    x[5].copy_(at::randn({cols}).round_());  // many ties, -0 and +0 among them
    for (int64_t k : {1, 4, 5, 16, 32}) {
      const std::string where = "cols " + std::to_string(cols) + " k " + std::to_string(k);
      auto [values, indices] = fused::TopKLogSoftmax(x.cuda(), k);
      auto [expected_values, expected_indices] = fused::TopKLogSoftmax(x, k);
      // Row 4 is all -inf: every entry ties, and log_softmax is NaN.
      EXPECT_TRUE(at::equal(indices.cpu(), expected_indices)) << where;
      // x - max - log(sum): two float32 computations differ by 2u relative in
      // x - max and by twice the log of the sum's error, 2 gamma(cols) + 4u.
      const double absolute = 2 * Gamma(cols, kFloat32Roundoff) + 4 * kFloat32Roundoff;
      EXPECT_TRUE(at::allclose(values.cpu(), expected_values, 2 * kFloat32Roundoff, absolute,
                               /*equal_nan=*/true))
          << where;
    }
  }
}

TEST(FusedRowOps, CudaGraphReplay) {
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  const c10::Device device(c10::kCUDA);
  at::Tensor x = at::zeros({3, 128256}, at::TensorOptions().device(device));
  at::Tensor best, probs;
  auto graph = CudaGraph::Capture(device, nullptr, [&] {
    best = fused::ArgmaxRows(x);
    probs = fused::SoftmaxRows(x);
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  for (uint64_t round = 0; round < 2; ++round) {
    const at::Tensor host = HardRows(3, 128256, 100 + round);
    x.copy_(host);
    (*graph)->Replay();
    EXPECT_TRUE(at::equal(best.cpu(), host.argmax(-1))) << "round " << round;
    // Two float32 softmaxes: each within SoftmaxTolerance of the exact one.
    EXPECT_TRUE(at::allclose(probs.cpu()[0], host[0].softmax(-1), 2 * SoftmaxTolerance(host[0], 1.0), 0.0))
        << "round " << round;
  }
}

}  // namespace
}  // namespace speclab
