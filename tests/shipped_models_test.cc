// The shipped model pair computes what HuggingFace transformers computes:
// reference logits recorded by scripts/shipped_reference.py on the GPU machine.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "framework/model/llama_model.h"
#include "framework/model/safetensors.h"
#include "tests/support/float_tolerance.h"

namespace speclab {
namespace {

class ShippedModelsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedModelsTest, LogitsMatchTransformers) {
  const std::string root = SPECLAB_SOURCE_DIR;
  const std::string fixture = root + "/tests/fixtures/shipped_reference/" + GetParam() + ".safetensors";
  const std::string model_dir = root + "/models/speclab-" + GetParam();
  if (!std::filesystem::exists(fixture) || !std::filesystem::exists(model_dir))
    GTEST_SKIP() << "no reference fixture " << fixture << " (run scripts/shipped_reference.py)";
  auto reference = ReadSafetensors(fixture);
  ASSERT_TRUE(reference.ok()) << reference.status();
  at::Tensor ids = reference->at("input_ids")[0];
  at::Tensor expected = reference->at("logits")[0];
  auto model = LlamaModel::Load(model_dir, c10::Device(c10::kCPU), at::kFloat, 128);
  ASSERT_TRUE(model.ok()) << model.status();
  c10::InferenceMode guard;
  const int64_t n = ids.size(0);
  auto logits = (*model)->Forward(ids, at::arange(n), at::ones({n, n}, at::kBool).tril());
  ASSERT_TRUE(logits.ok()) << logits.status();
  // speclab's float32 forward and transformers' (float32, CPU) each within the
  // first-order bound of the model's reductions
  // (tests/support/float_tolerance.h).
  const double relative = ((*logits - expected).abs().max() / expected.abs().max()).item<double>();
  EXPECT_LE(relative, testing::ForwardTolerance((*model)->config(), n, testing::UnitRoundoff(at::kFloat)))
      << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Pair, ShippedModelsTest, ::testing::Values("target", "drafter"));

}  // namespace
}  // namespace speclab
