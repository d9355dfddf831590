// verifiers::BlockAccepted: the ATen formula on the CPU and the kernels
// (cuda/block_kernels.h) on CUDA, against the rule in float64.
#include "algorithms/verifiers/block/block_accepted.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "framework/core/float_bounds.h"
#include "framework/model/fused_ops.h"
#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

using float_bounds::Gamma;
using float_bounds::kFloat32Roundoff;

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

TEST(BlockAccepted, BlockAcceptedIsTheLastSuccessfulPosition) {
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
          auto [tau, weights] = verifiers::BlockAccepted(c.tokens.to(device), c.p.to(device), c.q.to(device), u.to(device));
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
  EXPECT_THROW(verifiers::BlockAccepted(c.tokens, c.p, c.q, at::zeros({4})), c10::Error);
  EXPECT_THROW(verifiers::BlockAccepted(c.tokens.narrow(0, 0, 1), c.p.narrow(0, 0, 1), c.q.narrow(0, 0, 1), at::zeros({0})),
               c10::Error);
}
}  // namespace
}  // namespace speclab
