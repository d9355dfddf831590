#include "experiments/experiment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "experiments/build_info.h"
#include "framework/core/file_util.h"
#include "tests/support/cli_process.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::speclab::testing::FileText;
using ::speclab::testing::StartCli;
using ::speclab::testing::WaitCli;
using ::speclab::testing::WaitUntil;

const std::string kRoot = SPECLAB_SOURCE_DIR;

RunFlags QuickstartFlags(std::vector<std::string> overrides) {
  RunFlags flags{.config_path = kRoot + "/configs/experiments/quickstart.yaml"};
  flags.overrides = {"models.device=cpu", "models.dtype=float32", "prompts.per_task=1", "decoding.max_new_tokens=4",
                     "decoding.temperatures=[1]"};
  flags.overrides.insert(flags.overrides.end(), overrides.begin(), overrides.end());
  return flags;
}

TEST(ExperimentTest, RepeatsTimeEachGenerationSeveralTimes) {
  RunFlags flags = QuickstartFlags({"decoding.repeats=3"});
  flags.out_dir = ::testing::TempDir() + "/experiment_test_" + std::to_string(::getpid());
  ASSERT_TRUE(RunExperiment(flags).ok());
  EXPECT_TRUE(fs::exists(fs::path(flags.out_dir) / "summary.csv"));
  RemoveTree(flags.out_dir);
}

TEST(ExperimentTest, RepeatsOutOfRangeNameTheKey) {
  const absl::Status status = RunExperiment(QuickstartFlags({"decoding.repeats=0"}));
  EXPECT_THAT(std::string(status.message()), HasSubstr("decoding.repeats"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("expected an integer in [1, 99]"));
}

// Values that once crashed or wrapped are refused, naming the key.
TEST(ExperimentTest, EmptyPromptListsAndHugeLengthsNameTheKey) {
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"prompts.files=[]"})).message()),
              HasSubstr("key 'prompts.files': expected at least one prompt file"));
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"decoding.max_new_tokens=4294967304"})).message()),
              HasSubstr("key 'decoding.max_new_tokens': expected an integer in [1, 1048576]"));
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"prompts.per_task=-1"})).message()),
              HasSubstr("key 'prompts.per_task'"));
}

// Names that would merge or corrupt summary rows, and thread counts LibTorch
// would hang on, are refused with the key; so are reserved task names.
TEST(ExperimentTest, MergingNamesAndHugeThreadCountsNameTheKey) {
  const std::string pld = "{type: prompt_lookup, max_ngram_size: 3, num_pred_tokens: 4}";
  const std::string twice = "methods=[{name: a, drafter: " + pld + ", verifier: {type: point_mass}}, {name: a, drafter: " +
                            pld + ", verifier: {type: point_mass}}]";
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({twice})).message()),
              HasSubstr("'a' names two methods (their rows would merge)"));
  const std::string comma = "methods=[{name: 'a,b', drafter: " + pld + ", verifier: {type: point_mass}}]";
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({comma})).message()), HasSubstr("key 'methods[0].name'"));
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"models.cpu_threads=100000"})).message()),
              HasSubstr("key 'models.cpu_threads': expected an integer in [0, 1024]"));
  const std::string prompts = ::testing::TempDir() + "/experiment_test_all_" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream(prompts) << R"({"id": "x", "task": "all", "prompt": "hello"})" << "\n";
  const absl::Status reserved = RunExperiment(QuickstartFlags({"prompts.files=[" + prompts + "]"}));
  EXPECT_THAT(std::string(reserved.message()), HasSubstr("key 'task': 'all' is reserved"));
  fs::remove(prompts);
}

// Each decoding key's error names that key, and an empty temperature list is
// refused where it is read (it used to fail in the forward-cost measurement).
TEST(ExperimentTest, DecodingErrorsNameTheirOwnKey) {
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"decoding.temperatures=[]"})).message()),
              HasSubstr("key 'decoding.temperatures': expected at least one temperature"));
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"decoding.top_k=-1"})).message()),
              HasSubstr("key 'decoding.top_k': expected an integer >= 0"));
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"decoding.top_p=1.5"})).message()),
              HasSubstr("key 'decoding.top_p': expected a number in (0, 1]"));
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"decoding.temperatures=[.nan]"})).message()),
              HasSubstr("key 'decoding.temperatures'"));
  // Greedy matching keeps the target's law only at T = 0: refused above it, named.
  const std::string greedy =
      "methods=[{name: g, drafter: {type: prompt_lookup, max_ngram_size: 3, num_pred_tokens: 4}, verifier: {type: "
      "greedy}}]";
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({greedy, "decoding.temperatures=[0, 0.7]"})).message()),
              HasSubstr("key 'methods[0].verifier': 'greedy' reads only the target's argmax, so it keeps the target's "
                        "law only at temperature 0, and decoding.temperatures has 0.7"));
  EXPECT_TRUE(RunExperiment(QuickstartFlags({greedy, "decoding.temperatures=[0]"})).ok());
}

// A run's folder: checked before decoding (an unwritable one, or one that
// holds another run, is refused unless --overwrite), written atomically, and
// recording the binary's own revision and every output's token ids.
TEST(ExperimentTest, OutputFoldersAreCheckedFirstAndNeverOverwrittenSilently) {
  const std::string dir = ::testing::TempDir() + "/experiment_test_out_" + std::to_string(::getpid());
  RemoveTree(dir);
  RunFlags flags = QuickstartFlags({"prompts.files=[" + kRoot + "/data/prompts/code.jsonl]"});
  flags.out_dir = dir;
  ASSERT_TRUE(RunExperiment(flags).ok());
  for (const char* file : {"summary.csv", "steps.pb", "outputs.jsonl", "config.resolved.yaml", "git_revision.txt",
                           "prompts.jsonl"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / file)) << file;
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_NE(entry.path().extension(), ".partial") << "a leftover " << entry.path();
  std::ifstream revision(fs::path(dir) / "git_revision.txt");
  std::string first_line, second_line;
  std::getline(revision, first_line);
  std::getline(revision, second_line);
  EXPECT_EQ(first_line, BuildRevision());
  EXPECT_THAT(second_line, ::testing::StartsWith("dirty: "));
  std::ifstream outputs(fs::path(dir) / "outputs.jsonl");
  std::string line;
  std::getline(outputs, line);
  EXPECT_THAT(line, HasSubstr("\"tokens\": ["));

  EXPECT_THAT(std::string(RunExperiment(flags).message()),
              HasSubstr("holds a finished run (summary.csv): choose another folder, or pass --overwrite"));
  flags.overwrite = true;
  EXPECT_TRUE(RunExperiment(flags).ok());
  RemoveTree(dir);

  flags.out_dir = "/proc/speclab_cannot_be_here";
  EXPECT_THAT(std::string(RunExperiment(flags).message()), HasSubstr("--out /proc/speclab_cannot_be_here: cannot"));
}

// A run killed with SIGKILL part way keeps every finished generation (journal.jsonl);
// --resume decodes only the rest and ends with the outputs of a run that was
// never interrupted (here after a Ctrl-C too). Without --resume the half-done
// folder is refused.
TEST(ExperimentTest, AKilledRunResumesToTheUninterruptedRunsOutputs) {
  const std::string base = ::testing::TempDir() + "/experiment_test_kill_" + std::to_string(::getpid());
  RemoveTree(base);
  fs::create_directories(base);
  std::vector<std::string> args = {"run", kRoot + "/configs/experiments/quickstart.yaml"};
  for (const std::string& set : {"models.device=cpu", "models.dtype=float32", "prompts.per_task=1",
                                 "decoding.max_new_tokens=24", "decoding.temperatures=[0, 1]"}) {
    args.push_back("--set");
    args.push_back(set);
  }
  const int units = 4 * 1 * 2 * 3;  // tasks x prompts x temperatures x (baseline and two methods)
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> all = args;
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  };
  const std::string killed = base + "/killed", whole = base + "/whole";
  const fs::path journal = fs::path(killed) / "journal.jsonl";
  const pid_t pid = StartCli(with({"--out", killed}), base + "/killed.log");
  auto lines = [&] {
    const std::string text = FileText(journal);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  WaitUntil([&] { return lines() >= 2; }, deadline);
  ::kill(pid, SIGKILL);
  EXPECT_EQ(WaitCli(pid), -SIGKILL);
  const int done = lines();
  ASSERT_GE(done, 2) << FileText(base + "/killed.log");
  ASSERT_LT(done, units) << "the run finished before it could be killed";
  EXPECT_FALSE(fs::exists(fs::path(killed) / "summary.csv"));

  EXPECT_EQ(WaitCli(StartCli(with({"--out", killed}), base + "/refused.log")), 1);
  EXPECT_THAT(FileText(base + "/refused.log"), HasSubstr("holds an unfinished run (journal.jsonl): pass --resume"));
  EXPECT_EQ(WaitCli(StartCli(with({"--out", killed, "--set", "decoding.seed=2", "--resume"}), base + "/other.log")),
            1);
  EXPECT_THAT(FileText(base + "/other.log"), HasSubstr("differs from this run's resolved config"));

  // Ctrl-C stops a run cleanly between prompts: exit 130, every finished prompt kept.
  const pid_t interrupted = StartCli(with({"--out", killed, "--resume"}), base + "/interrupted.log");
  WaitUntil([&] { return lines() >= done + 1; }, deadline);
  ::kill(interrupted, SIGINT);
  EXPECT_EQ(WaitCli(interrupted), 130) << FileText(base + "/interrupted.log");
  EXPECT_THAT(FileText(base + "/interrupted.log"), HasSubstr("interrupted: "));
  EXPECT_THAT(FileText(base + "/interrupted.log"), HasSubstr("the same command with --resume finishes the run"));
  const int kept = lines();
  EXPECT_GT(kept, done);
  EXPECT_EQ(FileText(journal).back(), '\n');  // whole lines only

  ASSERT_EQ(WaitCli(StartCli(with({"--out", killed, "--resume"}), base + "/resumed.log")), 0)
      << FileText(base + "/resumed.log");
  EXPECT_THAT(FileText(base + "/resumed.log"), HasSubstr("resuming: " + std::to_string(kept) + " of " + std::to_string(units)));
  ASSERT_EQ(WaitCli(StartCli(with({"--out", whole}), base + "/whole.log")), 0) << FileText(base + "/whole.log");
  EXPECT_EQ(lines(), units);
  const std::string outputs = FileText(fs::path(whole) / "outputs.jsonl");
  EXPECT_EQ(std::count(outputs.begin(), outputs.end(), '\n'), units);
  EXPECT_EQ(FileText(fs::path(killed) / "outputs.jsonl"), outputs);
  EXPECT_TRUE(fs::exists(fs::path(killed) / "summary.csv"));
  RemoveTree(base);
}

// Another model's tokenizer is refused at load: Qwen3's 151k tokens do not fit
// the shipped target's 8000 (outputs would decode to nothing).
TEST(ExperimentTest, AnotherModelsTokenizerIsRefused) {
  const std::string qwen = kRoot + "/tests/fixtures/tokenizers/qwen3/tokenizer.json";
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"models.tokenizer=" + qwen})).message()),
              HasSubstr("key 'models.tokenizer': the tokenizer has"));
}

// Decoding past the target's trained context (2048 positions) is refused up front.
TEST(ExperimentTest, DecodingPastTheTrainedContextIsRefused) {
  EXPECT_THAT(std::string(RunExperiment(QuickstartFlags({"decoding.max_new_tokens=4000"})).message()),
              HasSubstr("past the target's max_position_embeddings (2048): lower decoding.max_new_tokens"));
}

// plugins: loads before anything else, and a bad entry names the key and the
// file (paths relative to the experiment's file).
TEST(ExperimentTest, AMissingPluginNamesTheKeyAndTheFile) {
  const absl::Status status = RunExperiment(QuickstartFlags({"plugins=[missing/libnothing.so]"}));
  EXPECT_THAT(std::string(status.message()), HasSubstr("quickstart.yaml"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("'plugins'"));
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(kRoot + "/configs/experiments/missing/libnothing.so: no such file"));
}

}  // namespace
}  // namespace speclab
