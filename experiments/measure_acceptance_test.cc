#include "experiments/measure_acceptance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "framework/core/file_util.h"
#include "framework/core/float_bounds.h"
#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/tokenizers/tokenizer.h"
#include "framework/model/llama_model.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kTokenizer = std::string(SPECLAB_SOURCE_DIR) + "/data/tokenizer/speclab.model";

// A random Llama over the tokenizer's vocabulary, saved as a model folder.
void SaveTinyModel(const std::string& dir, int64_t vocab, uint64_t seed) {
  ModelConfig config;
  config.vocab_size = vocab;
  config.hidden_size = 32;
  config.intermediate_size = 64;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 8;
  config.max_position_embeddings = 1024;
  auto model = LlamaModel::CreateRandom(config, c10::Device(c10::kCPU), at::kFloat, 512, seed);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->Save(dir, at::kFloat).ok());
}

class MeasureAcceptanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kTokenizer)) GTEST_SKIP() << "no data/tokenizer/speclab.model";
    dir_ = fs::temp_directory_path() / ("measure_acceptance_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    auto tokenizer = LoadTokenizer(kTokenizer);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    SaveTinyModel((dir_ / "target").string(), (*tokenizer)->vocab_size(), 1);
    SaveTinyModel((dir_ / "drafter").string(), (*tokenizer)->vocab_size(), 2);
    std::ofstream(dir_ / "prompts.jsonl") << R"({"id": "a", "task": "prose", "prompt": "The cat sat on the mat."})"
                                          << "\n"
                                          << R"({"id": "b", "task": "prose", "prompt": "Once upon a time"})" << "\n";
  }
  void TearDown() override {
    if (!dir_.empty()) RemoveTree((dir_).string());
  }

  // `more_methods`: method lines after the first (YAML list items).
  std::string WriteConfig(const std::string& measure, const std::string& more_methods = "") {
    const std::string path = (dir_ / "experiment.yaml").string();
    std::ofstream(path) << "name: probe\n"
                        << "models: {target: " << (dir_ / "target").string() << ", tokenizer: " << kTokenizer
                        << ", device: cpu, dtype: float32, kv_capacity: 512}\n"
                        << "prompts: {files: [" << (dir_ / "prompts.jsonl").string() << "]}\n"
                        << "decoding: {temperatures: [0, 1], max_new_tokens: 12, seed: 3}\n"
                        << "methods:\n"
                        << "  - {name: tree, drafter: {type: model, path: " << (dir_ / "drafter").string()
                        << "}, tree_builder: {type: chain}, verifier: {type: rejection}}\n"
                        << more_methods << measure;
    return path;
  }

  fs::path dir_;
};

TEST_F(MeasureAcceptanceTest, WritesAnAcceptanceVectorAndLatencyProfileSequoiaCanRead) {
  const std::string config = WriteConfig("measure_acceptance: {width: 4, budgets: [1, 2, 4, 8], repeats: 2}\n");
  const std::string out = (dir_ / "acceptance.yaml").string();
  ASSERT_TRUE(RunMeasureAcceptance(config, {}, out).ok());
  auto written = Options::FromFile(out);
  ASSERT_TRUE(written.ok()) << written.status();
  auto p = written->GetDoubleList("acceptance");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->size(), 4u);
  const double total = std::accumulate(p->begin(), p->end(), 0.0);
  EXPECT_GE(total, 0.0);
  EXPECT_LE(total, 1.0 + float_bounds::Gamma(4, float_bounds::kFloat64Roundoff));  // a sum of 4 frequencies
  EXPECT_GT(*written->GetInt("steps"), 0);
  auto profile = written->GetMap("latency_profile");
  ASSERT_TRUE(profile.ok());
  EXPECT_EQ(profile->GetDoubleList("target_ms")->size(), 4u);
  EXPECT_GE(*profile->GetDouble("draft_ms"), 0.0);

  // The file feeds the sequoia builder directly.
  Options spec = *Options::FromString("{type: sequoia, acceptance_file: " + out + ", latency_profile_file: " + out + "}",
                                      "builder.yaml");
  auto builder = TreeBuilderRegistry::Create(spec, "tree builder");
  // A probe on random models may accept nothing: then sequoia refuses with a clear message.
  if (total > 0) {
    EXPECT_TRUE(builder.ok()) << builder.status();
  } else {
    EXPECT_THAT(builder.status().message(), HasSubstr("drafts nothing"));
  }

  // The same config still runs as an experiment config (the section is known).
  Options root = *Options::FromFile(config);
  EXPECT_TRUE(root.Has("measure_acceptance"));
}

// measure-acceptance builds the first method only, so one config can hold a
// method that reads the profile it writes (cost_aware): measured first, then
// run.
TEST_F(MeasureAcceptanceTest, MeasuresForAConfigWhoseLaterMethodsReadTheProfile) {
  const std::string out = (dir_ / "acceptance.yaml").string();
  const std::string config =
      WriteConfig("measure_acceptance: {width: 1, budgets: [1, 2, 4], repeats: 2}\n",
                  "  - {name: adaptive, drafter: {type: model, path: " + (dir_ / "drafter").string() +
                      "}, verifier: {type: rejection}, length_policy: {type: cost_aware, latency_profile_file: " +
                      out + "}}\n");
  ASSERT_FALSE(fs::exists(out));
  const absl::Status measured = RunMeasureAcceptance(config, {}, out);
  ASSERT_TRUE(measured.ok()) << measured;
  auto profile = Options::FromString("{type: cost_aware, latency_profile_file: " + out + "}", "policy.yaml");
  ASSERT_TRUE(profile.ok());
  EXPECT_TRUE(LengthPolicyRegistry::Create(*profile, "length policy").ok());
}

TEST_F(MeasureAcceptanceTest, RefusesTemperatureZeroAndUnknownSettings) {
  const std::string out = (dir_ / "acceptance.yaml").string();
  auto zero = RunMeasureAcceptance(WriteConfig("measure_acceptance: {temperature: 0}\n"), {}, out);
  EXPECT_THAT(zero.message(), HasSubstr("key 'measure_acceptance.temperature'"));
  auto typo = RunMeasureAcceptance(WriteConfig("measure_acceptance: {widht: 4}\n"), {}, out);
  EXPECT_THAT(typo.message(), HasSubstr("unknown key 'measure_acceptance.widht'"));
}

}  // namespace
}  // namespace speclab
