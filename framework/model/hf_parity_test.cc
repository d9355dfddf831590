// Parity with HuggingFace transformers: the fixtures under
// tests/fixtures/hf_parity/ are written by scripts/hf_reference.py (tiny random
// models plus transformers' own float32 logits); this test loads each model
// and checks prefill, incremental decoding and a token tree against them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "framework/model/llama_model.h"
#include "framework/model/safetensors.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/float_tolerance.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;

std::string FixtureRoot() {
  if (const char* dir = std::getenv("SPECLAB_HF_PARITY_DIR")) return dir;
  return std::string(SPECLAB_SOURCE_DIR) + "/tests/fixtures/hf_parity";
}

// SPECLAB_TEST_DEVICE=cuda runs the comparison on the GPU (still float32).
using ::speclab::testing::TestDevice;

std::vector<std::string> FixtureFolders() {
  std::vector<std::string> out;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(FixtureRoot(), error)) {
    if (fs::exists(entry.path() / "config.json") && fs::exists(entry.path() / "reference.safetensors")) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

double RelError(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ca = a.to(at::kCPU, at::kFloat);
  const at::Tensor cb = b.to(at::kCPU, at::kFloat);
  return (ca - cb).abs().max().item<double>() / std::max(cb.abs().max().item<double>(), 1e-30);
}

at::Tensor Causal(int64_t n, c10::Device device) { return at::ones({n, n}, at::kBool).tril().to(device); }

// Checks one fixture folder; failures name the folder and the stage.
void CheckFixture(const std::string& dir) {
  SCOPED_TRACE(dir);
  const c10::Device device = TestDevice();
  auto refs = ReadSafetensors(dir + "/reference.safetensors");
  ASSERT_TRUE(refs.ok()) << refs.status();
  for (const char* key : {"prompt", "prefill_logits", "prefill_hidden", "decode_tokens", "decode_logits",
                          "tree_tokens", "tree_parents", "tree_logits"}) {
    ASSERT_TRUE(refs->count(key)) << "reference.safetensors lacks " << key;
  }
  auto loaded = LlamaModel::Load(dir, device, at::kFloat, /*kv_capacity=*/64);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LlamaModel& model = **loaded;
  // speclab's float32 forward and transformers' each within the first-order
  // bound of the model's reductions at the cache's length
  // (tests/support/float_tolerance.h).
  const double kTol = testing::ForwardTolerance(model.config(), model.capacity(), testing::UnitRoundoff(at::kFloat));

  // Prefill: the whole prompt as one causal chain, keeping every hidden
  // state transformers returns with output_hidden_states.
  const at::Tensor hidden = refs->at("prefill_hidden");
  const int layers = static_cast<int>(model.config().num_hidden_layers);
  ASSERT_EQ(hidden.size(0), layers + 1);
  std::vector<int> every(layers + 1);
  for (int i = 0; i <= layers; ++i) every[i] = i;
  ASSERT_TRUE(model.KeepHiddenStates(every).ok());
  const at::Tensor prompt = refs->at("prompt").to(device);
  const int64_t t = prompt.size(0);
  auto prefill = model.Forward(prompt, at::arange(t, prompt.options()), Causal(t, device));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_LT(RelError(*prefill, refs->at("prefill_logits")), kTol) << "prefill";
  for (int i = 0; i <= layers; ++i) {
    absl::StatusOr<at::Tensor> states = model.HiddenStates(i);
    ASSERT_TRUE(states.ok()) << states.status();
    EXPECT_LT(RelError(*states, hidden[i]), kTol) << "hidden state " << i;
  }
  std::vector<int64_t> all(t);
  for (int64_t i = 0; i < t; ++i) all[i] = i;
  ASSERT_TRUE(model.Commit(all).ok());

  // Incremental decoding, one token at a time (transformers used past_key_values).
  const at::Tensor decode_tokens = refs->at("decode_tokens").to(device);
  const at::Tensor decode_logits = refs->at("decode_logits");
  for (int64_t i = 0; i < decode_tokens.size(0); ++i) {
    const int64_t position = model.committed_length();
    auto step = model.Forward(decode_tokens.narrow(0, i, 1), at::full({1}, position, prompt.options()),
                              Causal(1, device));
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_LT(RelError((*step)[0], decode_logits[i]), kTol) << "decode step " << i;
    ASSERT_TRUE(model.Commit({0}).ok());
  }

  // A token tree after the prompt; transformers computed each node's path separately.
  ASSERT_TRUE(model.Truncate(t).ok());
  const at::Tensor parents = refs->at("tree_parents");
  const int64_t n = parents.size(0);
  std::vector<int64_t> depth(n, 0);
  at::Tensor mask = at::zeros({n, n}, at::kBool);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t parent = parents[i].item<int64_t>();
    ASSERT_LT(parent, i) << "tree not in topological order";
    depth[i] = parent < 0 ? 0 : depth[parent] + 1;
    for (int64_t j = i; j >= 0; j = parents[j].item<int64_t>()) mask[i][j] = true;
  }
  at::Tensor positions = at::tensor(depth, at::kLong) + t;
  auto tree = model.Forward(refs->at("tree_tokens").to(device), positions.to(device), mask.to(device));
  ASSERT_TRUE(tree.ok()) << tree.status();
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_LT(RelError((*tree)[i], refs->at("tree_logits")[i]), kTol) << "tree node " << i;
  }
}

TEST(HfParityTest, MatchesTransformersLogits) {
  const std::vector<std::string> folders = FixtureFolders();
  if (folders.empty()) {
    GTEST_SKIP() << "no HF parity fixtures under " << FixtureRoot()
                 << " (generate them with: python3 scripts/hf_reference.py --out tests/fixtures/hf_parity)";
  }
  if (TestDevice().is_cuda() && !at::hasCUDA()) GTEST_SKIP() << "SPECLAB_TEST_DEVICE=cuda but no CUDA";
  for (const std::string& dir : folders) CheckFixture(dir);
}

}  // namespace
}  // namespace speclab
