// fused::ArgmaxRows, fused::SoftmaxRows and fused::TopKLogSoftmax: the ATen
// formula on the CPU, the chunked kernels (cuda/row_kernels.h) on CUDA,
// checked against ATen
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

// A drafted token's facts against float64: q[token] exactly (a copy; 1
// without q); the largest probability, 1 / S, is a softmax entry
// (SoftmaxTolerance); the entropy log S - E / S with E = sum p S (x - M)
// carries S's relative error once in log S and, with E's, at most twice over
// sum p |x - M| <= span in E / S.
TEST(FusedRowOps, DraftFactsMatchFloat64) {
  c10::InferenceMode guard;
  const at::Tensor cpu_x = at::randn({3, 300}).mul_(3);
  const at::Tensor p = cpu_x.softmax(-1);
  const at::Tensor cpu_tokens = at::tensor({4, 0, 299}, at::kLong);
  const at::Tensor entropy_and_top = at::cat({-(p * p.clamp_min(1e-30).log()).sum(-1, true), p.amax(-1, true)}, 1);
  EXPECT_TRUE(at::equal(fused::DraftFactsRows(cpu_x, at::Tensor(), at::Tensor()),
                        at::cat({at::ones({3, 1}), entropy_and_top}, 1)));
  EXPECT_TRUE(at::equal(fused::DraftFactsRows(cpu_x, p, cpu_tokens),
                        at::cat({p.gather(1, cpu_tokens.unsqueeze(1)), entropy_and_top}, 1)));
  SPECLAB_SKIP_UNLESS_CUDA();
  for (int64_t cols : {1, 7, 2048, 8000, 16384, 16385, 128256}) {
    for (int64_t rows : {1, 5}) {
      const std::string where = "rows " + std::to_string(rows) + ", cols " + std::to_string(cols);
      at::Tensor x = at::randn({rows, cols}).mul_(4);
      if (cols > 2) x[0][1] = -kInf;  // a top-k-masked entry
      const at::Tensor q = at::rand({rows, cols});
      const at::Tensor tokens = at::randint(cols, {rows}, at::kLong);
      const at::Tensor got = fused::DraftFactsRows(x.cuda(), q.cuda(), tokens.cuda()).cpu();
      EXPECT_TRUE(at::equal(got.select(1, 0), q.gather(1, tokens.unsqueeze(1)).squeeze(1))) << where;
      const at::Tensor argmax_facts = fused::DraftFactsRows(x.cuda(), at::Tensor(), at::Tensor()).cpu();
      EXPECT_TRUE(at::equal(argmax_facts.select(1, 0), at::ones({rows}))) << where;
      EXPECT_TRUE(at::equal(argmax_facts.narrow(1, 1, 2), got.narrow(1, 1, 2))) << where;
      const at::Tensor exact = x.to(at::kDouble).softmax(-1);
      const at::Tensor entropy = -(exact * exact.clamp_min(1e-300).log()).sum(-1);
      const at::Tensor top = exact.amax(-1);
      const double tolerance = SoftmaxTolerance(x, 1.0);
      const at::Tensor finite = x.masked_select(x.isfinite());
      const double span = (finite.max() - finite.min()).item<double>();
      const at::Tensor summary = got.to(at::kDouble);
      EXPECT_LE(((summary.select(1, 2) - top).abs() / top).max().item<double>(), tolerance) << where;
      EXPECT_LE((summary.select(1, 1) - entropy).abs().max().item<double>(), tolerance * (1 + 2 * span)) << where;
    }
  }
}

// The top-k warp's probabilities: on the CPU the ATen sequence bit for bit;
// on CUDA the same kept set (every entry at least the k-th largest, ties
// kept: rows of repeated values, -inf entries, k past the finite entries)
// and, kept entries, float64's softmax over them within SoftmaxTolerance.
TEST(FusedRowOps, TopKSoftmaxRowsKeepsTheTopKAndTies) {
  const at::Tensor small = at::randn({3, 300});
  const at::Tensor y = small / 0.7;
  const at::Tensor kth = std::get<0>(y.topk(20, -1)).narrow(-1, 19, 1);
  EXPECT_TRUE(at::equal(fused::TopKSoftmaxRows(small, 0.7, 20), fused::SoftmaxRows(y.masked_fill(y < kth, -kInf))));
  EXPECT_THROW(fused::TopKSoftmaxRows(small, 0.7, 301), c10::Error);
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  for (int64_t cols : {7, 2049, 8000, 128256}) {
    at::Tensor x = at::randn({6, cols}).mul_(3);
    x[1].fill_(0.5f);  // all tied: every entry kept
    x[2].narrow(0, 0, cols / 2).fill_(-kInf);
    x[3].narrow(0, 1, cols - 1).fill_(-kInf);  // fewer finite entries than k
    if (cols > 40) x[4].narrow(0, 10, 30).fill_(5.0f);  // ties across the k-th
    for (int64_t k : {1, 5, 20}) {
      if (k > cols) continue;
      for (double temperature : {1.0, 0.6}) {
        const std::string where = "cols " + std::to_string(cols) + " k " + std::to_string(k) + " T " +
                                  std::to_string(temperature);
        const at::Tensor got = fused::TopKSoftmaxRows(x.cuda(), temperature, k).cpu();
        const at::Tensor yx = x / temperature;
        const at::Tensor kept = yx >= std::get<0>(yx.topk(k, -1)).narrow(-1, k - 1, 1);
        EXPECT_TRUE(at::equal(got > 0, kept & yx.isfinite())) << where;
        const at::Tensor want = yx.masked_fill(~kept, -kInf).to(at::kDouble).softmax(-1);
        const at::Tensor rel = (got.to(at::kDouble) - want).abs() / want.clamp_min(DBL_MIN);
        EXPECT_LE(rel.masked_select(want > 0).max().item<double>(), SoftmaxTolerance(x, temperature)) << where;
      }
    }
  }
}

// The warp and the race in one launch: on the CPU the four ops it stands
// for; on CUDA bit for bit the same kernels' answers run one by one (the
// warp of the gathered rows, then ArgmaxRows or TopKRows over them with the
// noise),
// with repeated rows, every warp path (candidates, the radix select past 32,
// no truncation at k = cols) and a zero in the noise.
TEST(FusedRowOps, TopKSoftmaxRaceIsTheWarpThenTheRace) {
  const auto longs = at::TensorOptions().dtype(at::kLong);
  const at::Tensor rows = at::tensor({2, 0, 2, 1, 2}, longs);
  for (const c10::Device device : {c10::Device(c10::kCPU), testing::TestDevice()}) {
    c10::InferenceMode guard;
    for (int64_t cols : {7, 300, 8000}) {
      at::Tensor x = at::randn({3, cols}).mul_(3);
      x[1].narrow(0, 0, cols / 2).fill_(-kInf);
      at::Tensor noise = at::empty({5, cols}).exponential_(1.0);
      noise[3][0] = 0.0f;  // clamped to FLT_MIN, as ArgmaxRows does
      for (int64_t k : {int64_t{1}, int64_t{5}, int64_t{20}, int64_t{40}, cols}) {
        if (k > cols) continue;
        const std::string where = "cols " + std::to_string(cols) + " k " + std::to_string(k);
        const at::Tensor on_x = x.to(device), on_noise = noise.to(device), on_rows = rows.to(device);
        const at::Tensor out = at::full({5, cols}, 7.0f, on_x.options());
        const at::Tensor tokens = fused::TopKSoftmaxRace(on_x, on_rows, 0.8, k, on_noise, out).reshape({-1});
        const at::Tensor gathered = on_x.index_select(0, on_rows);
        const at::Tensor want_q =
            k == cols ? fused::SoftmaxRows(gathered, 0.8) : fused::TopKSoftmaxRows(gathered, 0.8, k);
        if (device.is_cpu() || k < cols) {
          EXPECT_TRUE(at::equal(out.cpu(), want_q.cpu())) << where;
        } else {  // the plain softmax kernel sums in another order
          EXPECT_TRUE(at::allclose(out.cpu(), want_q.cpu(), 1e-5, 1e-7)) << where;
        }
        EXPECT_TRUE(at::equal(tokens.cpu(), fused::ArgmaxRows(out, on_noise).cpu())) << where;
        // Without rows: x's own rows, in order.
        const at::Tensor own = at::empty({3, cols}, on_x.options()), own_noise = on_noise.narrow(0, 0, 3);
        const at::Tensor own_tokens = fused::TopKSoftmaxRace(on_x, at::Tensor(), 0.8, k, own_noise, own).reshape({-1});
        EXPECT_TRUE(at::equal(own_tokens.cpu(), fused::ArgmaxRows(own, own_noise).cpu())) << where;
        // Several places: TopKRows' ranks, past q's support (k = 1) too.
        for (int64_t ranks : {3, 7}) {
          if (ranks > cols) continue;
          const at::Tensor ranked = fused::TopKSoftmaxRace(on_x, on_rows, 0.8, k, on_noise, out, ranks);
          EXPECT_TRUE(at::equal(ranked.cpu(), fused::TopKRows(out, on_noise, ranks).second.cpu()))
              << where << " ranks " << ranks;
        }
      }
    }
  }
}

// The k best quotients of each row, best first, ties to the smaller index,
// NaN first: on the CPU a stable descending sort; on CUDA the same indices
// and values, bit for bit (HardRows' ties, NaN and -inf rows; a divisor with
// a zero, clamped to FLT_MIN).
TEST(FusedRowOps, TopKRowsRanksByValueThenIndex) {
  const at::Tensor x = at::tensor({1.0f, 3.0f, 3.0f, 2.0f}).reshape({1, 4});
  auto [values, indices] = fused::TopKRows(x, at::Tensor(), 3);
  EXPECT_TRUE(at::equal(indices, at::tensor(std::vector<int64_t>{1, 2, 3}).reshape({1, 3})));
  EXPECT_TRUE(at::equal(values, at::tensor({3.0f, 3.0f, 2.0f}).reshape({1, 3})));
  const at::Tensor d = at::tensor({1.0f, 6.0f, 1.0f, 4.0f}).reshape({1, 4});
  EXPECT_TRUE(at::equal(fused::TopKRows(x, d, 2).second, at::tensor(std::vector<int64_t>{2, 0}).reshape({1, 2})));
  EXPECT_THROW(fused::TopKRows(x, at::Tensor(), 5), c10::Error);
  SPECLAB_SKIP_UNLESS_CUDA();
  c10::InferenceMode guard;
  for (int64_t cols : {7, 2049, 8000, 128256}) {
    const at::Tensor rows = HardRows(5, cols, static_cast<uint64_t>(cols + 3));
    const at::Tensor noise = at::empty({5, cols}).exponential_(1.0);
    noise[0][0] = 0.0f;
    for (int64_t k : {1, 3, 7}) {
      if (k > cols) continue;
      for (bool divided : {false, true}) {
        const at::Tensor div = divided ? noise : at::Tensor();
        auto [cpu_values, cpu_indices] = fused::TopKRows(rows, div, k);
        auto [cuda_values, cuda_indices] = fused::TopKRows(rows.cuda(), divided ? noise.cuda() : at::Tensor(), k);
        const std::string where = "cols " + std::to_string(cols) + " k " + std::to_string(k) + (divided ? " /noise" : "");
        EXPECT_TRUE(at::equal(cuda_indices.cpu(), cpu_indices)) << where;
        EXPECT_TRUE(at::allclose(cuda_values.cpu(), cpu_values, 0, 0, /*equal_nan=*/true)) << where;
      }
    }
  }
}

// Chain rejection's stopping race at every row, as racing all rows' residuals
// (p itself where the residual has no mass) and keeping that row: rows 0..2
// random laws, row 1's successor equal to row 1 (no residual mass), the last
// row raced on p.
TEST(FusedRowOps, TopKLogSoftmaxRanksByValueThenIndex) {
  const at::Tensor x = at::tensor({1.0f, 3.0f, 3.0f, 0.0f, 3.0f, -kInf}, at::kFloat).view({1, 6});
  auto [values, indices] = fused::TopKLogSoftmax(x, 4);
  EXPECT_TRUE(at::equal(indices, at::tensor({1, 2, 4, 0}, at::kLong).view({1, 4}))) << indices;
  EXPECT_TRUE(at::equal(values, x.log_softmax(-1).index_select(1, indices[0])));  // the CPU form is this formula
  EXPECT_THROW(fused::TopKLogSoftmax(x, 7), c10::Error);
}

// On the CPU both top-k forms take a partial sort per row, which must pick
// what ATen's stable descending sort puts first: ties to the smaller index,
// NaN above every number, all--inf rows, -0 and +0 (rows of HardRows, and a
// rounded row full of ties).
TEST(FusedRowOps, CpuTopKIsTheStableDescendingSortsPrefix) {
  for (int64_t cols : {7, 300, 8000}) {
    at::Tensor x = at::cat({HardRows(5, cols, static_cast<uint64_t>(cols)), at::randn({1, cols}).round_()});
    const at::Tensor order = std::get<1>(x.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true));
    for (int64_t k : {1, 4, 7}) {
      const std::string where = "cols " + std::to_string(cols) + " k " + std::to_string(k);
      const at::Tensor expected = order.narrow(-1, 0, k);
      EXPECT_TRUE(at::equal(fused::TopKLogSoftmax(x, k).second, expected)) << where;
      auto [values, indices] = fused::TopKRows(x, at::Tensor(), k);
      EXPECT_TRUE(at::equal(indices, expected)) << where;
      EXPECT_TRUE(at::allclose(values, x.gather(-1, expected), 0, 0, /*equal_nan=*/true)) << where;
    }
  }
}

TEST(FusedRowOps, CudaTopKLogSoftmaxMatchesAtenOnTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  // Up to 130000 columns: 64 chunks of a row, fewer where k would give the merge more than 1024 candidates.
  for (int64_t cols : {40, 300, 8000, 40000, 130000}) {
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
