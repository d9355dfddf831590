// The acceptance head: its features, its network, and its file.
#include "algorithms/length_policies/common/acceptance_head.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "algorithms/length_policies/common/acceptance_head_testing.h"
#include "framework/core/length_policy.h"
#include "framework/device/device_length_stop.h"
#include "algorithms/length_policies/common/cuda/acceptance_head_kernel.h"
#include "tests/support/cuda_tests.h"

namespace speclab::acceptance_head {
namespace {

using ::testing::HasSubstr;

TEST(AcceptanceHeadTest, SummaryFeaturesAreTheTopProbabilitiesAndTheEntropy) {
  const at::Tensor p = at::tensor({0.5, 0.25, 0.25, 0.0}, at::kDouble).reshape({1, 4});
  const at::Tensor x = FeaturesOf(Features::kSummary, p.log().to(at::kFloat), at::Tensor());
  ASSERT_EQ(x.size(1), kSummaryTopK + 1);
  EXPECT_NEAR(x[0][0].item<double>(), 0.5, 1e-7);
  EXPECT_NEAR(x[0][2].item<double>(), 0.25, 1e-7);
  EXPECT_EQ(x[0][4].item<double>(), 0.0);  // past the vocabulary: zero
  EXPECT_NEAR(x[0][kSummaryTopK].item<double>(), 1.5 * std::log(2.0), 1e-6);  // the -inf entry adds nothing
  const at::Tensor rows = FeaturesOf(Features::kLogProbs, p.log().to(at::kFloat), at::Tensor());
  ASSERT_EQ(rows.size(1), 4 + kSummaryTopK + 1);  // the row, then the summary
  EXPECT_EQ(rows[0][3].item<double>(), -1.0);     // floored, then scaled to [-1, 0]
  EXPECT_TRUE(at::allclose(rows.narrow(1, 4, kSummaryTopK + 1), x));
  EXPECT_NEAR(rows[0][0].item<double>(), std::log(0.5) / -kLogProbFloor, 1e-7);
}

// SpecDec++'s input: the drafter's hidden state as it is, read from the
// facts' hidden rows (not their log-probabilities) on both forms.
TEST(AcceptanceHeadTest, HiddenFeaturesAreTheDraftersHiddenState) {
  EXPECT_EQ(ParseFeatures("hidden").value(), Features::kHidden);
  const AcceptanceHead head = NewHead(Features::kHidden, 50, /*width=*/4, /*seed=*/3, /*prior_logit=*/0.0,
                                      /*hidden_size=*/6);
  EXPECT_EQ(FeatureCount(Features::kHidden, 50, 6), 6);
  EXPECT_EQ(head.w1.size(0), 6);
  EXPECT_EQ(RowOf(head), DraftRow::kHidden);
  EXPECT_EQ(RowWidth(head), 6);
  EXPECT_EQ(RowOf(NewHead(Features::kLogProbs, 50, 4, 3, 0.0)), DraftRow::kLogProbs);
  EXPECT_EQ(RowWidth(NewHead(Features::kSummary, 50, 4, 3, 0.0)), 50);
  const at::Tensor states = at::randn({3, 6}, at::kFloat);
  EXPECT_TRUE(at::equal(FeaturesOf(Features::kHidden, states, at::Tensor()), states.to(at::kDouble)));
  const HeadOnDevice on_device(head);
  const at::Tensor chain = on_device.Predict(DeviceDraftFacts{.log_probs = at::zeros({3, 50}), .hidden = states});
  const at::Tensor expected =
      PredictFromFeatures(states.to(at::kDouble), head.w1, head.b1, head.w2, head.b2);
  EXPECT_TRUE(at::equal(chain, expected));
  // One row against the product of that row alone: BLAS may round a product
  // of three rows otherwise in the last bit (the GPU machine's LibTorch did).
  const at::Tensor last = states[2].contiguous();
  const at::Tensor expected_last =
      PredictFromFeatures(last.view({1, 6}).to(at::kDouble), head.w1, head.b1, head.w2, head.b2);
  EXPECT_EQ(on_device.Predict(DraftProgress{.depth = 3, .hidden = absl::MakeConstSpan(last.data_ptr<float>(), 6)}),
            expected_last.item<double>());
}

TEST(AcceptanceHeadTest, SummaryIndexFeaturesAddTheDraftsIndex) {
  const at::Tensor p = at::tensor({0.5, 0.25, 0.25, 0.0, 0.7, 0.1, 0.1, 0.1}, at::kDouble).reshape({2, 4});
  const at::Tensor lp = p.log().to(at::kFloat);
  const at::Tensor x = FeaturesOf(Features::kSummaryIndex, lp, at::tensor({1, 5}, at::kLong));
  ASSERT_EQ(x.size(1), FeatureCount(Features::kSummaryIndex, 4, 0));
  EXPECT_TRUE(at::equal(x.narrow(1, 0, kSummaryTopK + 1), FeaturesOf(Features::kSummary, lp, at::Tensor())));
  EXPECT_EQ(x[0][kSummaryTopK + 1].item<double>(), 1.0);
  EXPECT_EQ(x[1][kSummaryTopK + 1].item<double>(), 5.0);
  // A chain's rows are drafts 1..n; one host row names its own depth.
  const HeadOnDevice head(NewHead(Features::kSummaryIndex, 4, /*hidden=*/3, /*seed=*/4, /*prior_logit=*/0.0));
  const at::Tensor chain = head.Predict(DeviceDraftFacts{.log_probs = lp});
  const absl::Span<const float> second = absl::MakeConstSpan(lp[1].data_ptr<float>(), 4);
  EXPECT_EQ(chain[1].item<double>(), head.Predict(DraftProgress{.depth = 2, .log_probs = second}));
  EXPECT_NE(chain[1].item<double>(), head.Predict(DraftProgress{.depth = 1, .log_probs = second}));
  EXPECT_EQ(ParseFeatures("summary_index").value(), Features::kSummaryIndex);
  EXPECT_THAT(ParseFeatures("index").status().message(), HasSubstr("summary_index"));
}

// The prediction on CUDA (one launch for the summary features, two for the
// log_probs ones, whose first layer over the row is split first) against
// FeaturesOf() and the network in ATen: each feature set, vocabularies below
// and above the summary's ten and
// a real one, narrow and the widest hidden layers, rows that are a view of
// wider ones (facts before them, as chains keep them), entries of -inf.
TEST(AcceptanceHeadTest, CudaKernelPredictsAsTheFeaturesAndTheNetwork) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(3);
  for (Features features : {Features::kLogProbs, Features::kSummary, Features::kSummaryIndex}) {
    for (int64_t vocab : {4, 37, 8000}) {
      for (int64_t hidden : {1, 16, kFusedMaxHidden}) {
        const AcceptanceHead head = NewHead(features, vocab, hidden, /*seed=*/7, /*prior_logit=*/0.3);
        const at::Tensor scale = at::rand({6, 1}, gen, at::kFloat) * 8;
        at::Tensor lp = (at::randn({6, vocab}, gen, at::kFloat) * scale).log_softmax(1);
        lp[2][vocab - 1] = -std::numeric_limits<float>::infinity();
        const at::Tensor wide = at::cat({at::rand({6, 3}, gen, at::kFloat), lp}, 1).to(at::kCUDA);
        const at::Tensor rows = wide.narrow(1, 3, vocab);
        const HeadOnDevice on_device(head);
        const at::Tensor fused = on_device.Predict(DeviceDraftFacts{.log_probs = rows}).cpu();
        const at::Tensor depths = at::arange(1, 7, at::TensorOptions().dtype(at::kDouble).device(at::kCUDA));
        const at::Tensor aten = PredictFromFeatures(FeaturesOf(features, rows, depths), head.w1.cuda(), head.b1.cuda(),
                                                    head.w2.cuda(), head.b2.cuda())
                                    .cpu();
        // float64 both ways, the sums in another order. The first layer sums
        // n = vocab + 12 terms |x w| <= 10 max|w1| (features <= 10: probabilities,
        // the row's scaled entries, the entropy <= log 8000, the index <= 6),
        // so each of its sums moves by <= n * 2^-52 * 10 n max|w1|; silu's
        // slope is <= 1.1, the output sums `hidden` of them times w2, and the
        // sigmoid's slope is <= 1/4: a bound far above rounding, far below a
        // wrong feature (~1e-2).
        const double n = static_cast<double>(vocab + 12), w1 = head.w1.abs().max().item<double>();
        const double w2 = head.w2.abs().max().item<double>();
        const double bound = (n + hidden) * std::ldexp(1.0, -52) * 10 * n * w1 * (1 + 1.1 * hidden * w2);
        EXPECT_LE((fused - aten).abs().max().item<double>(), bound)
            << FeaturesName(features) << ", vocab " << vocab << ", hidden " << hidden;
      }
    }
  }
}

// The hidden features' launch against ATen: widths below and above a warp
// and the shipped drafter's, narrow and the widest layers, rows that are a
// view of wider ones (the facts before them).
TEST(AcceptanceHeadTest, CudaKernelPredictsAsTheNetworkOnHiddenStates) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(5);
  for (int64_t width : {4, 37, 160}) {
    for (int64_t hidden : {1, 16, kFusedMaxHidden}) {
      const AcceptanceHead head = NewHead(Features::kHidden, 50, hidden, /*seed=*/9, /*prior_logit=*/0.3, width);
      const at::Tensor wide = at::cat({at::rand({6, 3}, gen, at::kFloat), at::randn({6, width}, gen, at::kFloat) * 3},
                                      1).to(at::kCUDA);
      const at::Tensor rows = wide.narrow(1, 3, width);
      const at::Tensor fused = HeadOnDevice(head).Predict(DeviceDraftFacts{.hidden = rows}).cpu();
      const at::Tensor aten =
          PredictFromFeatures(rows.cpu().to(at::kDouble), head.w1, head.b1, head.w2, head.b2);
      // float64 both ways, the sums in another order: the first layer's n =
      // width + 1 terms |x w| <= max|x| max|w1| each move its sum by <= n *
      // 2^-52 * n max|x| max|w1|; silu's slope <= 1.1, `hidden` of them times
      // w2, the sigmoid's slope <= 1/4.
      const double n = static_cast<double>(width + 1), x = rows.abs().max().item<double>();
      const double w1 = head.w1.abs().max().item<double>(), w2 = head.w2.abs().max().item<double>();
      const double bound = (n + hidden) * std::ldexp(1.0, -52) * n * x * w1 * (1 + 1.1 * hidden * w2);
      EXPECT_LE((fused - aten).abs().max().item<double>(), bound) << "width " << width << ", hidden " << hidden;
    }
  }
}

TEST(AcceptanceHeadTest, LossWeighsRejectionsAsSpecDecPlusPlus) {
  const at::Tensor predicted = at::tensor({0.9, 0.2, 0.5}, at::kDouble);
  const at::Tensor labels = at::tensor({1.0, 0.0, 0.25}, at::kDouble);
  // float64 both ways, a dozen rounded operations on terms below 2 (log1p
  // against log among them): each moves a result below 1 by at most a few
  // 2^-53, so 1e-14 holds with room and no wrong weight fits inside it.
  const double tolerance = 1e-14;
  // Weight 1: plain binary cross-entropy, the mean over the positions.
  EXPECT_NEAR(AcceptanceLoss(predicted, labels, 1.0).item<double>(),
              at::binary_cross_entropy(predicted, labels).item<double>(), tolerance);
  // Weight 6 on the reject class: each term's (1 - y) part weighs 6, and the
  // sum is divided by the weights' total, 6 * (0 + 1 + 0.75) + (1 + 0 + 0.25).
  const double expected = (6 * (-std::log(0.8)) + 1 * (-std::log(0.9)) + 6 * 0.75 * (-std::log(0.5)) +
                           0.25 * (-std::log(0.5))) /
                          (6 * 1.75 + 1.25);
  EXPECT_NEAR(AcceptanceLoss(predicted, labels, 6.0).item<double>(), expected, tolerance);
  // A sure wrong prediction costs a finite loss (the clamp).
  EXPECT_TRUE(std::isfinite(AcceptanceLoss(at::tensor({0.0}, at::kDouble), at::tensor({1.0}, at::kDouble), 6.0)
                                .item<double>()));
}

TEST(AcceptanceHeadTest, PredictsTheNetworksSigmoid) {
  AcceptanceHead head = NewHead(Features::kSummary, 3, /*hidden=*/2, /*seed=*/1, /*prior_logit=*/0.5);
  const at::Tensor p = at::tensor({0.6, 0.3, 0.1}, at::kDouble);
  const at::Tensor x = at::cat({p, at::zeros({kSummaryTopK - 3}, at::kDouble), -(p * p.log()).sum().reshape({1})})
                           .reshape({1, -1});
  const at::Tensor h = x.matmul(head.w1) + head.b1;
  const double expected = 1 / (1 + std::exp(-((h * h.sigmoid()).matmul(head.w2).item<double>() + 0.5)));
  EXPECT_NEAR(HeadOnDevice(head).Predict(DeviceDraftFacts{.log_probs = p.log().reshape({1, 3}).to(at::kFloat)})
                  .item<double>(),
              expected, 1e-6);
}

TEST(AcceptanceHeadTest, RoundTripsThroughItsFile) {
  const AcceptanceHead head = NewHead(Features::kSummary, 50, /*hidden=*/6, /*seed=*/2, /*prior_logit=*/1.0);
  auto loaded = LoadAcceptanceHead(testing::WriteHead(head, "round_trip"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->features, Features::kSummary);
  EXPECT_EQ(loaded->vocab_size, 50);
  EXPECT_TRUE(at::allclose(loaded->w1, head.w1.to(at::kFloat).to(at::kDouble)));
  EXPECT_TRUE(at::equal(loaded->b2, head.b2));
  auto indexed = LoadAcceptanceHead(
      testing::WriteHead(NewHead(Features::kSummaryIndex, 50, 6, 2, 1.0), "round_trip_index"));
  ASSERT_TRUE(indexed.ok()) << indexed.status();
  EXPECT_EQ(indexed->features, Features::kSummaryIndex);
  EXPECT_EQ(indexed->w1.size(0), kSummaryTopK + 2);
  auto hidden = LoadAcceptanceHead(
      testing::WriteHead(NewHead(Features::kHidden, 50, 6, 2, 1.0, /*hidden_size=*/20), "round_trip_hidden"));
  ASSERT_TRUE(hidden.ok()) << hidden.status();
  EXPECT_EQ(hidden->features, Features::kHidden);
  EXPECT_EQ(hidden->hidden_size, 20);
  EXPECT_EQ(hidden->w1.size(0), 20);
}

TEST(AcceptanceHeadTest, BadFilesNameTheFileAndTheTensor) {
  EXPECT_THAT(LoadAcceptanceHead("/nonexistent/head.safetensors").status().message(),
              HasSubstr("/nonexistent/head.safetensors"));
  AcceptanceHead head = NewHead(Features::kLogProbs, 8, /*hidden=*/3, /*seed=*/2, /*prior_logit=*/0.0);
  head.b1 = at::zeros({4}, at::kDouble);
  const std::string wrong = testing::WriteHead(head, "wrong_shape");
  EXPECT_THAT(LoadAcceptanceHead(wrong).status().message(), HasSubstr("'b1' has shape [4], expected [3]"));
  AcceptanceHead hidden = NewHead(Features::kHidden, 8, /*width=*/3, /*seed=*/2, /*prior_logit=*/0.0, 5);
  hidden.w1 = at::zeros({6, 3}, at::kDouble);  // a row 6 wide, where the head says 5
  EXPECT_THAT(LoadAcceptanceHead(testing::WriteHead(hidden, "wrong_width")).status().message(),
              HasSubstr("'w1' has shape [6, 3], expected [5, 3]"));
  const std::string path = testing::WriteHead(NewHead(Features::kLogProbs, 8, 3, 2, 0.0), "truncated");
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size() / 2);
  EXPECT_THAT(LoadAcceptanceHead(path).status().message(), HasSubstr(path));
}

}  // namespace
}  // namespace speclab::acceptance_head
