#include "framework/sampling.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "framework/core/float_bounds.h"

namespace speclab {
namespace {

TEST(SamplingTest, TemperatureZeroIsOneHotArgmax) {
  at::Tensor logits = at::tensor({0.1f, 2.0f, -1.0f, 1.5f}).reshape({1, 4});
  at::Tensor p = Probabilities(logits, {.temperature = 0});
  EXPECT_TRUE(p.equal(at::tensor({0.f, 1.f, 0.f, 0.f}).reshape({1, 4})));
}

TEST(SamplingTest, TargetRowsAreTheLogitsAtTemperatureZero) {
  // At T = 0 verifiers read only the argmax: the logits' own, as the one-hot p's.
  const at::Tensor logits = at::tensor({0.1f, 2.0f, -1.0f, 1.5f, 3.0f, 0.0f, 3.0f, -2.0f}).reshape({2, 4});
  const at::Tensor greedy = TargetRows(logits.to(at::kDouble), {.temperature = 0});
  EXPECT_EQ(greedy.scalar_type(), at::kFloat);
  EXPECT_TRUE(greedy.equal(logits));
  EXPECT_TRUE(GreedyTokens(greedy).equal(GreedyTokens(Probabilities(logits, {.temperature = 0}))));
  EXPECT_TRUE(TargetRows(logits, {.temperature = 0.7}).equal(Probabilities(logits, {.temperature = 0.7})));
}

TEST(SamplingTest, TemperatureTopKTopPChain) {
  // float32 softmaxes of 4 logits against exact values: the logits' own
  // rounding and the shift by the maximum (2u |logit|, |logit| < 3), exp's
  // 2 ulps, the normaliser's gamma(4), the division, the expected value's
  // rounding to float: relative.
  const double u = float_bounds::kFloat32Roundoff;
  const double rtol = float_bounds::Gamma(4, u) + 12 * u;
  at::Tensor logits = at::tensor({std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)}).reshape({1, 4});
  at::Tensor plain = Probabilities(logits, {.temperature = 1});
  EXPECT_TRUE(plain.allclose(at::tensor({0.5f, 0.3f, 0.15f, 0.05f}).reshape({1, 4}), rtol, 0.0));
  at::Tensor topk = Probabilities(logits, {.temperature = 1, .top_k = 2});
  EXPECT_TRUE(topk.allclose(at::tensor({0.625f, 0.375f, 0.f, 0.f}).reshape({1, 4}), rtol, 0.0));
  // top_p 0.8: 0.5 + 0.3 reaches 0.8, so the third token is dropped.
  at::Tensor topp = Probabilities(logits, {.temperature = 1, .top_p = 0.8});
  EXPECT_TRUE(topp.allclose(at::tensor({0.625f, 0.375f, 0.f, 0.f}).reshape({1, 4}), rtol, 0.0));
  at::Tensor hot = Probabilities(logits, {.temperature = 0.5});
  const double z = 0.25 + 0.09 + 0.0225 + 0.0025;
  EXPECT_NEAR(hot[0][0].item<double>(), 0.25 / z,
              2 * rtol * 0.25 / z);  // the halved temperature doubles the shift's error
}

TEST(SamplingTest, SameSeedSameDraws) {
  at::Tensor probs = at::full({3, 50}, 1.0 / 50);
  at::Generator a = MakeGenerator(c10::Device(c10::kCPU), 42);
  at::Generator b = MakeGenerator(c10::Device(c10::kCPU), 42);
  EXPECT_TRUE(SampleRows(probs, a).equal(SampleRows(probs, b)));
}

TEST(SamplingTest, ValidateRefusesBadParameters) {
  EXPECT_FALSE((SamplingParams{.temperature = -1}).Validate().ok());
  EXPECT_FALSE((SamplingParams{.top_p = 0}).Validate().ok());
  EXPECT_TRUE((SamplingParams{.temperature = 0.7, .top_k = 5, .top_p = 0.9}).Validate().ok());
}

}  // namespace
}  // namespace speclab
