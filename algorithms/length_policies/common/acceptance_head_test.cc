// The acceptance head: its features, its network, and its file.
#include "algorithms/length_policies/common/acceptance_head.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>
#include <string>

#include "algorithms/length_policies/common/acceptance_head_testing.h"

namespace speclab::acceptance_head {
namespace {

using ::testing::HasSubstr;

TEST(AcceptanceHeadTest, SummaryFeaturesAreTheTopProbabilitiesAndTheEntropy) {
  const at::Tensor p = at::tensor({0.5, 0.25, 0.25, 0.0}, at::kDouble).reshape({1, 4});
  const at::Tensor x = FeaturesOf(Features::kSummary, p.log().to(at::kFloat));
  ASSERT_EQ(x.size(1), kSummaryTopK + 1);
  EXPECT_NEAR(x[0][0].item<double>(), 0.5, 1e-7);
  EXPECT_NEAR(x[0][2].item<double>(), 0.25, 1e-7);
  EXPECT_EQ(x[0][4].item<double>(), 0.0);  // past the vocabulary: zero
  EXPECT_NEAR(x[0][kSummaryTopK].item<double>(), 1.5 * std::log(2.0), 1e-6);  // the -inf entry adds nothing
  const at::Tensor rows = FeaturesOf(Features::kLogProbs, p.log().to(at::kFloat));
  ASSERT_EQ(rows.size(1), 4 + kSummaryTopK + 1);  // the row, then the summary
  EXPECT_EQ(rows[0][3].item<double>(), -1.0);     // floored, then scaled to [-1, 0]
  EXPECT_TRUE(at::allclose(rows.narrow(1, 4, kSummaryTopK + 1), x));
  EXPECT_NEAR(rows[0][0].item<double>(), std::log(0.5) / -kLogProbFloor, 1e-7);
}

TEST(AcceptanceHeadTest, PredictsTheNetworksSigmoid) {
  AcceptanceHead head = NewHead(Features::kSummary, 3, /*hidden=*/2, /*seed=*/1, /*prior_logit=*/0.5);
  const at::Tensor p = at::tensor({0.6, 0.3, 0.1}, at::kDouble);
  const at::Tensor x = at::cat({p, at::zeros({kSummaryTopK - 3}, at::kDouble), -(p * p.log()).sum().reshape({1})})
                           .reshape({1, -1});
  const at::Tensor h = x.matmul(head.w1) + head.b1;
  const double expected = 1 / (1 + std::exp(-((h * h.sigmoid()).matmul(head.w2).item<double>() + 0.5)));
  EXPECT_NEAR(HeadOnDevice(head).Predict(p.log().reshape({1, 3}).to(at::kFloat)).item<double>(), expected, 1e-6);
}

TEST(AcceptanceHeadTest, RoundTripsThroughItsFile) {
  const AcceptanceHead head = NewHead(Features::kSummary, 50, /*hidden=*/6, /*seed=*/2, /*prior_logit=*/1.0);
  auto loaded = LoadAcceptanceHead(testing::WriteHead(head, "round_trip"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->features, Features::kSummary);
  EXPECT_EQ(loaded->vocab_size, 50);
  EXPECT_TRUE(at::allclose(loaded->w1, head.w1.to(at::kFloat).to(at::kDouble)));
  EXPECT_TRUE(at::equal(loaded->b2, head.b2));
}

TEST(AcceptanceHeadTest, BadFilesNameTheFileAndTheTensor) {
  EXPECT_THAT(LoadAcceptanceHead("/nonexistent/head.safetensors").status().message(),
              HasSubstr("/nonexistent/head.safetensors"));
  AcceptanceHead head = NewHead(Features::kLogProbs, 8, /*hidden=*/3, /*seed=*/2, /*prior_logit=*/0.0);
  head.b1 = at::zeros({4}, at::kDouble);
  const std::string wrong = testing::WriteHead(head, "wrong_shape");
  EXPECT_THAT(LoadAcceptanceHead(wrong).status().message(), HasSubstr("'b1' has shape [4], expected [3]"));
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
