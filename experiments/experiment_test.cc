#include "experiments/experiment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "framework/core/file_util.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

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
