#include "experiments/train.h"

#include "algorithms/length_policies/common/acceptance_head.h"
#include "drafters/eagle/eagle_head.h"
#include "drafters/kangaroo/kangaroo_adapter.h"
#include "drafters/hydra/hydra_drafter.h"
#include "drafters/medusa/medusa_drafter.h"

#include <ATen/ATen.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "framework/core/file_util.h"
#include "framework/model/llama_model.h"
#include "framework/model/safetensors.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;


// The committed tokenizer (SPECLAB_TEST_TOKENIZER may point elsewhere).
std::string TokenizerPath() {
  if (const char* env = std::getenv("SPECLAB_TEST_TOKENIZER"); env != nullptr && fs::exists(env)) return env;
  const std::string path = std::string(SPECLAB_SOURCE_DIR) + "/data/tokenizer/speclab.model";
  return fs::exists(path) ? path : "";
}

// A small corpus with learnable structure: templated sentences, documents
// ended by "<|endoftext|>" lines as in data/corpus.
void WriteCorpus(const std::string& path, int documents, uint32_t seed) {
  const std::vector<std::string> subjects = {"the cat", "a dog", "the bird", "my friend", "the old man"};
  const std::vector<std::string> verbs = {"sees", "likes", "follows", "finds", "watches"};
  const std::vector<std::string> objects = {"the ball", "a red house", "the river", "some bread", "the moon"};
  std::mt19937 rng(seed);
  std::ofstream out(path);
  for (int d = 0; d < documents; ++d) {
    const int lines = 2 + static_cast<int>(rng() % 3);
    for (int l = 0; l < lines; ++l) {
      out << subjects[rng() % subjects.size()] << " " << verbs[rng() % verbs.size()] << " "
          << objects[rng() % objects.size()] << ".\n";
    }
    out << "<|endoftext|>\n";
  }
}

struct Row {
  int64_t step;
  double loss;
};

std::vector<Row> ReadLog(const std::string& csv) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    Row row{};
    EXPECT_TRUE(absl::SimpleAtoi(cells[0], &row.step)) << line;
    EXPECT_TRUE(absl::SimpleAtod(cells[1], &row.loss)) << line;
    rows.push_back(row);
  }
  return rows;
}

// Every match of `pattern` in a training log: its captured groups as numbers.
std::vector<std::vector<double>> Captures(const std::string& log, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<std::vector<double>> matches;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) {
    std::vector<double> groups;
    for (size_t g = 1; g < it->size(); ++g) groups.push_back(std::stod((*it)[g]));
    matches.push_back(std::move(groups));
  }
  return matches;
}

// The first captured group of every match of `pattern` in a training log.
std::vector<double> FirstCaptures(const std::string& log, const std::string& pattern) {
  std::vector<double> values;
  for (const std::vector<double>& groups : Captures(log, pattern)) values.push_back(groups.front());
  return values;
}

class TrainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/speclab_train_test_" + std::to_string(::getpid()));
    RemoveTree(*dir_);
    fs::create_directories(*dir_);
    WriteCorpus(*dir_ + "/train.txt", 400, 1);
    WriteCorpus(*dir_ + "/valid.txt", 20, 2);
    WriteCorpus(*dir_ + "/test.txt", 20, 3);
  }
  static void TearDownTestSuite() {
    RemoveTree(*dir_);
    delete dir_;
  }

  // A config for a tiny model; `extra` lines go under `training:`.
  static std::string WriteConfig(const std::string& name, const std::string& output, const std::string& extra = "") {
    const std::string path = *dir_ + "/" + name;
    std::ofstream out(path);
    out << "model:\n"
           "  hidden_size: 32\n"
           "  intermediate_size: 64\n"
           "  num_hidden_layers: 2\n"
           "  num_attention_heads: 2\n"
           "  num_key_value_heads: 1\n"
           "  tie_word_embeddings: true\n"
           "data:\n"
           "  tokenizer: "
        << TokenizerPath() << "\n  train: " << *dir_ << "/train.txt\n  valid: " << *dir_
        << "/valid.txt\n  test: " << *dir_
        << "/test.txt\n"
           "  seq_len: 32\n"
           "training:\n"
           "  device: cpu\n"
           "  batch_size: 4\n"
           "  steps: 30\n"
           "  lr: 1e-2\n"
           "  min_lr: 1e-3\n"
           "  warmup_steps: 5\n"
           "  eval_every: 10\n"
           "  eval_batches: 2\n"
           "  checkpoint_every: 10\n"
           "  log_every: 5\n"
           "  seed: 7\n"
        << extra << "output: " << output << "\nsave_dtype: float32\nresume: true\n";
    return path;
  }

  // A draft head's config: `head` (its section) on the test corpus, 60 steps.
  static std::string WriteDraftHeadConfig(const std::string& name, const std::string& head, const std::string& output) {
    const std::string path = *dir_ + "/" + name;
    std::ofstream(path) << head << "data:\n  tokenizer: " << TokenizerPath() << "\n  train: " << *dir_
                        << "/train.txt\n  valid: " << *dir_
                        << "/valid.txt\n  seq_len: 32\ntraining:\n  batch_size: 4\n  steps: 60\n  warmup_steps: 5\n"
                           "  lr: 1e-2\n  log_every: 10\n  eval_windows: 4\noutput: "
                        << output << "\n";
    return path;
  }

  static std::string* dir_;
};

std::string* TrainTest::dir_ = nullptr;

TEST_F(TrainTest, UnknownKeyIsReportedWithFileAndLine) {
  const std::string config = WriteConfig("typo.yaml", *dir_ + "/typo", "  bach_size: 4\n");
  const absl::Status status = RunTraining(config, {});
  ASSERT_FALSE(status.ok());
  int typo_line = 0;
  {
    std::ifstream in(config);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (line.find("bach_size") != std::string::npos) typo_line = n;
  }
  ASSERT_GT(typo_line, 0);
  EXPECT_NE(status.message().find(absl::StrCat(config, ":", typo_line, ":")), std::string::npos) << status;
  EXPECT_NE(status.message().find("training.bach_size"), std::string::npos) << status;
  // Overrides are checked the same way.
  const absl::Status bad_value = RunTraining(WriteConfig("ok.yaml", *dir_ + "/typo"), {"training.steps=many"});
  ASSERT_FALSE(bad_value.ok());
  EXPECT_NE(bad_value.message().find("training.steps"), std::string::npos) << bad_value;
}

TEST_F(TrainTest, LossDecreasesAndResumeMatchesAnUninterruptedRun) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  // Uninterrupted: 30 steps, updating the model's own tensors one by one.
  const std::string full = *dir_ + "/full";
  const absl::Status full_status =
      RunTraining(WriteConfig("full.yaml", full), {"training.flat_parameters=false"});
  ASSERT_TRUE(full_status.ok()) << full_status;
  const std::vector<Row> rows = ReadLog(full + "/training_log.csv");
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows.front().step, 5);
  EXPECT_EQ(rows.back().step, 30);
  EXPECT_LT(rows.back().loss, rows.front().loss - 1.0);
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.model", "training_log.json"})
    EXPECT_TRUE(fs::exists(full + "/" + file)) << file;
  auto model = LlamaModel::Load(full, c10::Device(c10::kCPU), at::kFloat, 16);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().hidden_size, 32);
  EXPECT_EQ((*model)->config().num_hidden_layers, 2);

  // Interrupted after 20 steps (training.run_steps), then resumed, with the
  // parameters re-pointed at the optimizer's flat buffers (the default).
  const std::string parts = *dir_ + "/parts";
  const std::string config = WriteConfig("parts.yaml", parts);
  const absl::Status first = RunTraining(config, {"training.run_steps=20"});
  ASSERT_TRUE(first.ok()) << first;
  EXPECT_FALSE(fs::exists(parts + "/model.safetensors"));  // unfinished: only the checkpoint
  std::ifstream state_in(parts + "/checkpoint/state.json");
  std::stringstream state;
  state << state_in.rdbuf();
  EXPECT_NE(state.str().find("\"step\": 20,"), std::string::npos) << state.str();
  const absl::Status second = RunTraining(config, {});
  ASSERT_TRUE(second.ok()) << second;
  const std::vector<Row> resumed = ReadLog(parts + "/training_log.csv");
  ASSERT_EQ(resumed.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(resumed[i].step, rows[i].step);
    EXPECT_EQ(resumed[i].loss, rows[i].loss) << "step " << rows[i].step;
  }
  // Same batches, same optimizer state, either update path: the same weights.
  auto a = ReadSafetensors(full + "/model.safetensors");
  auto b = ReadSafetensors(parts + "/model.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (const auto& [name, tensor] : *a)
    EXPECT_TRUE(at::equal(tensor, b->at(name))) << name << ": max difference " << (tensor - b->at(name)).abs().max();
}

TEST_F(TrainTest, DistillsInBfloat16FromATeacher) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  // The teacher: a short fp32 run.
  const std::string teacher = *dir_ + "/teacher";
  const absl::Status teacher_status = RunTraining(WriteConfig("teacher.yaml", teacher), {"training.steps=10"});
  ASSERT_TRUE(teacher_status.ok()) << teacher_status;
  // The student: bf16 working copy with fp32 master weights, KL + CE.
  const std::string student = *dir_ + "/student";
  const absl::Status status = RunTraining(
      WriteConfig("student.yaml", student, "  dtype: bfloat16\n  distill:\n    teacher: " + teacher +
                                               "\n    alpha: 0.5\n"),
      {"training.steps=10", "model.num_hidden_layers=1", "save_dtype=bfloat16"});
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<Row> rows = ReadLog(student + "/training_log.csv");
  ASSERT_FALSE(rows.empty());
  EXPECT_LT(rows.back().loss, rows.front().loss);
  auto model = LlamaModel::Load(student, c10::Device(c10::kCPU), at::kFloat, 16);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->config().num_hidden_layers, 1);
  auto tensors = ReadSafetensors(student + "/model.safetensors");
  ASSERT_TRUE(tensors.ok());
  EXPECT_EQ(tensors->begin()->second.scalar_type(), at::kBFloat16);
}

// The acceptance head of the predicted_acceptance and disco policies: a
// tiny pair (two short runs), then a head of each feature set, its held-out
// numbers recorded and the file loadable as a head of the pair's
// vocabulary (the hidden head also of its hidden width); an unknown key is
// refused, named.
TEST_F(TrainTest, FitsAnAcceptanceHeadOnAModelPair) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  const std::string target = *dir_ + "/head_target", drafter = *dir_ + "/head_drafter";
  ASSERT_TRUE(RunTraining(WriteConfig("head_target.yaml", target), {"training.steps=10"}).ok());
  ASSERT_TRUE(RunTraining(WriteConfig("head_drafter.yaml", drafter), {"training.steps=3", "training.seed=9"}).ok());
  for (const std::string features : {"log_probs", "summary", "summary_index", "hidden"}) {
    const std::string path = *dir_ + "/head_" + features + ".yaml";
    const std::string output = *dir_ + "/heads/" + features + ".safetensors";
    // DISCO's index, and SpecDec++'s hidden states as the policy sees them:
    // the drafter's own 4 drafts after 28 tokens of each window.
    const bool rollout = features == "summary_index" || features == "hidden";
    std::ofstream(path) << "acceptance_head:\n  features: " << features << (rollout ? "\n  rollout: 4" : "")
                        << "\n  hidden: 8\n  target: " << target
                        << "\n  drafter: " << drafter << "\n  temperature: 1.0\ndata:\n  tokenizer: "
                        << TokenizerPath() << "\n  train: " << *dir_ << "/train.txt\n  valid: " << *dir_
                        << "/valid.txt\n  seq_len: 32\ntraining:\n  batch_size: 4\n  steps: 40\n  lr: 1e-2\n"
                           "  log_every: 40\n  eval_windows: 4\noutput: "
                        << output << "\n";
    const absl::Status status = RunTraining(path, {});
    ASSERT_TRUE(status.ok()) << status;
    auto head = acceptance_head::LoadAcceptanceHead(output);
    ASSERT_TRUE(head.ok()) << head.status();
    auto model = LlamaModel::Load(drafter, c10::Device(c10::kCPU), at::kFloat, 16);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(head->vocab_size, (*model)->config().vocab_size);
    EXPECT_EQ(acceptance_head::FeaturesName(head->features), features);
    if (features == "hidden") EXPECT_EQ(head->hidden_size, (*model)->config().hidden_size);
    auto log = ReadFileToString(output + ".log.json");
    ASSERT_TRUE(log.ok()) << log.status();
    // 4 held-out windows: 32 positions each, or their 4 drafts.
    EXPECT_THAT(*log, ::testing::HasSubstr(rollout ? "\"held_out\": {\"positions\": 16"
                                                   : "\"held_out\": {\"positions\": 128"));
    EXPECT_THAT(RunTraining(path, {"acceptance_head.layers=2"}).message(), ::testing::HasSubstr("layers"));
    EXPECT_THAT(RunTraining(path, {"acceptance_head.reject_weight=0"}).message(),
                ::testing::AllOf(::testing::HasSubstr("reject_weight"), ::testing::HasSubstr("(0, 1000]")));
    if (features == "summary_index") {
      EXPECT_THAT(RunTraining(path, {"acceptance_head.rollout=0"}).message(),
                  ::testing::AllOf(::testing::HasSubstr("rollout"), ::testing::HasSubstr("index")));
      EXPECT_THAT(RunTraining(path, {"acceptance_head.rollout=32"}).message(),
                  ::testing::HasSubstr("expected an integer in [0, 31]"));
    }
  }
}


// An EAGLE head on a tiny target: the losses fall, the held-out numbers of
// every depth are recorded, and the file loads as a head of that target.
TEST_F(TrainTest, FitsAnEagleHeadOnATarget) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  const std::string target = *dir_ + "/eagle_target";
  ASSERT_TRUE(RunTraining(WriteConfig("eagle_target.yaml", target), {"training.steps=20"}).ok());
  const std::string output = *dir_ + "/heads/eagle.safetensors";
  const std::string path = WriteDraftHeadConfig("eagle.yaml", "eagle_head:\n  target: " + target + "\n  layers: 1\n", output);
  const absl::Status status = RunTraining(path, {});
  ASSERT_TRUE(status.ok()) << status;
  auto model = LlamaModel::Load(target, c10::Device(c10::kCPU), at::kFloat, 64);
  ASSERT_TRUE(model.ok()) << model.status();
  auto head = LoadEagleHead(output, **model, 64);
  ASSERT_TRUE(head.ok()) << head.status();
  auto log = ReadFileToString(output + ".log.json");
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<double> losses;
  for (const std::vector<double>& m : Captures(*log, "\"feature_loss\": ([0-9.]+), \"token_loss\": ([0-9.]+)\\}"))
    losses.push_back(m[0] + 0.1 * m[1]);
  ASSERT_GE(losses.size(), 6u) << *log;
  EXPECT_LT(losses[5], losses[0]) << *log;  // the last training step's against the first logged
  EXPECT_THAT(*log, ::testing::HasSubstr("{\"depth\": 4, \"agreement\": "));
  EXPECT_THAT(RunTraining(path, {"eagle_head.heads=2"}).message(), ::testing::HasSubstr("eagle_head.heads"));
}

// An EAGLE-3 head on the same kind of target, by the training-time test:
// every step's divergence from the target is logged and step 1's falls, the held-out numbers of
// every depth are recorded, and the file loads as a head fusing the named
// layers; a key of EAGLE-1's recipe is refused, named.
TEST_F(TrainTest, FitsAnEagle3HeadOnATarget) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  const std::string target = *dir_ + "/eagle3_target";
  ASSERT_TRUE(RunTraining(WriteConfig("eagle3_target.yaml", target), {"training.steps=20"}).ok());
  const std::string output = *dir_ + "/heads/eagle3.safetensors";
  const std::string path = WriteDraftHeadConfig(
      "eagle3.yaml", "eagle3_head:\n  target: " + target + "\n  feature_layers: [0, 1, 2]\n  ttt_steps: 3\n", output);
  const absl::Status status = RunTraining(path, {});
  ASSERT_TRUE(status.ok()) << status;
  auto model = LlamaModel::Load(target, c10::Device(c10::kCPU), at::kFloat, 64);
  ASSERT_TRUE(model.ok()) << model.status();
  auto head = LoadEagleHead(output, **model, 64);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->feature_layers, (std::vector<int>{0, 1, 2}));
  auto log = ReadFileToString(output + ".log.json");
  ASSERT_TRUE(log.ok()) << log.status();
  const std::vector<double> losses =
      FirstCaptures(*log, "\"step1_kl\": ([0-9.]+), \"step2_kl\": [0-9.]+, \"step3_kl\": [0-9.]+\\}");
  ASSERT_GE(losses.size(), 6u) << *log;
  EXPECT_LT(losses[5], losses[0]) << *log;
  EXPECT_THAT(*log, ::testing::HasSubstr("{\"depth\": 4, \"agreement\": "));
  EXPECT_THAT(RunTraining(path, {"eagle3_head.feature_noise=0.1"}).message(),
              ::testing::HasSubstr("eagle3_head.feature_noise"));
  EXPECT_THAT(RunTraining(path, {"eagle3_head.feature_layers=[1]"}).message(), ::testing::HasSubstr("two or more"));
}

// Kangaroo's adapter on a 2-layer target, after its first layer: its
// divergence from the target falls, the held-out numbers are recorded, and
// the file loads as a drafting model of that target; a bad exit layer is
// refused, named.
TEST_F(TrainTest, FitsAKangarooAdapterOnATarget) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  const std::string target = *dir_ + "/kangaroo_target";
  ASSERT_TRUE(RunTraining(WriteConfig("kangaroo_target.yaml", target), {"training.steps=20"}).ok());
  const std::string output = *dir_ + "/heads/kangaroo.safetensors";
  const std::string path =
      WriteDraftHeadConfig("kangaroo.yaml", "kangaroo_adapter:\n  target: " + target + "\n  exit_layer: 1\n", output);
  const absl::Status status = RunTraining(path, {});
  ASSERT_TRUE(status.ok()) << status;
  auto model = LlamaModel::Load(target, c10::Device(c10::kCPU), at::kFloat, 64);
  ASSERT_TRUE(model.ok()) << model.status();
  auto drafting = LoadKangarooModel(output, **model, 64);
  ASSERT_TRUE(drafting.ok()) << drafting.status();
  EXPECT_EQ((*drafting)->config().num_hidden_layers, 2);
  auto log = ReadFileToString(output + ".log.json");
  ASSERT_TRUE(log.ok()) << log.status();
  const std::vector<double> kl = FirstCaptures(*log, "\"kl\": ([0-9.]+)\\}");
  ASSERT_GE(kl.size(), 6u) << *log;
  EXPECT_LT(kl[5], kl[0]) << *log;
  EXPECT_THAT(*log, ::testing::HasSubstr("\"held_out\": {\"windows\": 4, \"agreement\": "));
  EXPECT_THAT(RunTraining(path, {"kangaroo_adapter.exit_layer=2"}).message(),
              ::testing::HasSubstr("kangaroo_adapter.exit_layer: exit layer 2 is outside [1, 1]"));
  EXPECT_THAT(RunTraining(path, {"kangaroo_adapter.layers=2"}).message(), ::testing::HasSubstr("kangaroo_adapter.layers"));
}

// Medusa's heads on the same kind of target: head 0's loss falls, the
// held-out numbers of every head are recorded, and the file loads as heads
// that read out through the target's LM head.
TEST_F(TrainTest, FitsMedusaHeadsOnATarget) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  const std::string target = *dir_ + "/medusa_target";
  ASSERT_TRUE(RunTraining(WriteConfig("medusa_target.yaml", target), {"training.steps=20"}).ok());
  const std::string output = *dir_ + "/heads/medusa.safetensors";
  const std::string path = WriteDraftHeadConfig("medusa.yaml", "medusa_head:\n  target: " + target + "\n  heads: 2\n", output);
  const absl::Status status = RunTraining(path, {});
  ASSERT_TRUE(status.ok()) << status;
  auto model = LlamaModel::Load(target, c10::Device(c10::kCPU), at::kFloat, 64);
  ASSERT_TRUE(model.ok()) << model.status();
  auto heads = LoadMedusaHeads(output, 2, 1, **model);
  ASSERT_TRUE(heads.ok()) << heads.status();
  EXPECT_FALSE((*heads)[0].lm_head.defined());
  auto log = ReadFileToString(output + ".log.json");
  ASSERT_TRUE(log.ok()) << log.status();
  const std::vector<double> losses = FirstCaptures(*log, "\"head0_loss\": ([0-9.]+)");
  ASSERT_EQ(losses.size(), 6u) << *log;
  EXPECT_LT(losses.back(), losses.front()) << *log;
  EXPECT_THAT(*log, ::testing::HasSubstr("{\"depth\": 2, \"agreement\": "));
  EXPECT_THAT(RunTraining(path, {"medusa_head.decay=2"}).message(), ::testing::HasSubstr("medusa_head.decay"));
}

// Hydra's heads: head 0's distillation loss falls, the held-out numbers of
// every head are recorded, and the file loads as heads whose first block
// reads the state and the path (two tokens for head 1).
TEST_F(TrainTest, FitsHydraHeadsOnATarget) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  const std::string target = *dir_ + "/hydra_target";
  ASSERT_TRUE(RunTraining(WriteConfig("hydra_target.yaml", target), {"training.steps=20"}).ok());
  const std::string output = *dir_ + "/heads/hydra.safetensors";
  const std::string path = WriteDraftHeadConfig("hydra.yaml", "hydra_head:\n  target: " + target + "\n  heads: 2\n", output);
  const absl::Status status = RunTraining(path, {});
  ASSERT_TRUE(status.ok()) << status;
  auto model = LlamaModel::Load(target, c10::Device(c10::kCPU), at::kFloat, 64);
  ASSERT_TRUE(model.ok()) << model.status();
  auto heads = LoadHydraHeads(output, 2, 1, **model);
  ASSERT_TRUE(heads.ok()) << heads.status();
  const int64_t hidden = (*model)->config().hidden_size;
  EXPECT_EQ((*heads)[1].in_weight.sizes(), (std::vector<int64_t>{hidden, 3 * hidden}));
  EXPECT_FALSE((*heads)[0].lm_head.defined());
  auto log = ReadFileToString(output + ".log.json");
  ASSERT_TRUE(log.ok()) << log.status();
  const std::vector<double> losses = FirstCaptures(*log, "\"head0_loss\": ([0-9.]+)");
  ASSERT_EQ(losses.size(), 6u) << *log;
  EXPECT_LT(losses.back(), losses.front()) << *log;
  EXPECT_THAT(*log, ::testing::HasSubstr("{\"depth\": 2, \"agreement\": "));
  EXPECT_THAT(RunTraining(path, {"hydra_head.layers=0"}).message(), ::testing::HasSubstr("hydra_head.layers"));
}

// A head training stopped early (training.run_steps: the checkpoint a killed
// run leaves) and resumed twice ends with the head, and the log, of an
// uninterrupted run, bit for bit: parameters, Adam's moments, the batch
// sampler and EAGLE's feature noise all restart where they stopped. A
// checkpoint of another head's shape is refused by name.
TEST_F(TrainTest, ResumedHeadTrainingEndsWithTheUninterruptedHead) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  const std::string target = *dir_ + "/resume_target";
  ASSERT_TRUE(RunTraining(WriteConfig("resume_target.yaml", target), {"training.steps=10"}).ok());
  const std::string head = "eagle_head:\n  target: " + target + "\n  layers: 1\n";
  const std::vector<std::string> settings = {"training.steps=12", "training.log_every=3"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), settings.begin(), settings.end());
    return more;
  };
  const std::string whole = *dir_ + "/heads/whole.safetensors", parts = *dir_ + "/heads/parts.safetensors";
  ASSERT_TRUE(RunTraining(WriteDraftHeadConfig("whole.yaml", head, whole), with({})).ok());
  const std::string config = WriteDraftHeadConfig("parts.yaml", head, parts);
  ASSERT_TRUE(RunTraining(config, with({"training.run_steps=5"})).ok());
  EXPECT_FALSE(fs::exists(parts));  // unfinished: only the checkpoint
  ASSERT_TRUE(fs::exists(parts + ".checkpoint.safetensors"));
  // Another head's shape: refused, naming the checkpoint and the tensor.
  const absl::Status other = RunTraining(config, with({"eagle_head.layers=2"}));
  EXPECT_THAT(other.message(), ::testing::HasSubstr(parts + ".checkpoint.safetensors"));
  EXPECT_THAT(other.message(), ::testing::HasSubstr("another head's"));
  ASSERT_TRUE(RunTraining(config, with({"training.run_steps=4"})).ok());
  ASSERT_TRUE(RunTraining(config, with({})).ok());
  EXPECT_FALSE(fs::exists(parts + ".checkpoint.safetensors"));  // a finished run removes it
  auto a = ReadSafetensors(whole), b = ReadSafetensors(parts);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (const auto& [name, tensor] : *a) EXPECT_TRUE(at::equal(tensor, b->at(name))) << name;
  EXPECT_EQ(*ReadFileToString(whole + ".log.json"), *ReadFileToString(parts + ".log.json"));
}

// The feature cache: an EAGLE-3 head (fused layers and final states both
// cached) trains on a pool of cached windows, its loss falls, and a run
// stopped and resumed rebuilds the same cache and ends with the uninterrupted
// run's head and log. A cache smaller than a batch is refused, named.
TEST_F(TrainTest, CachedFeaturesTrainAndResumeAsTheUninterruptedRun) {
  if (TokenizerPath().empty()) GTEST_SKIP() << "no data/tokenizer/speclab.model";
  const std::string target = *dir_ + "/cache_target";
  ASSERT_TRUE(RunTraining(WriteConfig("cache_target.yaml", target), {"training.steps=10"}).ok());
  const std::string head = "eagle3_head:\n  target: " + target + "\n  feature_layers: [0, 1, 2]\n  ttt_steps: 2\n";
  const std::vector<std::string> settings = {"training.steps=30", "training.log_every=5",
                                             "training.feature_cache_windows=12"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), settings.begin(), settings.end());
    return more;
  };
  const std::string whole = *dir_ + "/heads/cached_whole.safetensors";
  const std::string parts = *dir_ + "/heads/cached_parts.safetensors";
  ASSERT_TRUE(RunTraining(WriteDraftHeadConfig("cached_whole.yaml", head, whole), with({})).ok());
  auto log = ReadFileToString(whole + ".log.json");
  ASSERT_TRUE(log.ok()) << log.status();
  const std::vector<double> losses = FirstCaptures(*log, "\"step1_kl\": ([0-9.]+)");
  ASSERT_GE(losses.size(), 6u) << *log;
  EXPECT_LT(losses[5], losses[0]) << *log;
  const std::string config = WriteDraftHeadConfig("cached_parts.yaml", head, parts);
  ASSERT_TRUE(RunTraining(config, with({"training.run_steps=13"})).ok());
  ASSERT_TRUE(RunTraining(config, with({})).ok());
  auto a = ReadSafetensors(whole), b = ReadSafetensors(parts);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (const auto& [name, tensor] : *a) EXPECT_TRUE(at::equal(tensor, b->at(name))) << name;
  EXPECT_EQ(*ReadFileToString(whole + ".log.json"), *ReadFileToString(parts + ".log.json"));
  EXPECT_THAT(RunTraining(config, {"training.feature_cache_windows=3"}).message(),
              ::testing::HasSubstr("training.feature_cache_windows"));
}

}  // namespace
}  // namespace speclab
