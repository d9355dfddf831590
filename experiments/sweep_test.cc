#include "experiments/sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/experiment.h"
#include "experiments/experiment_loading.h"
#include "experiments/sweep_runner.h"
#include "framework/core/file_util.h"
#include "tests/support/cli_process.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::speclab::testing::FileText;
using ::speclab::testing::StartCli;
using ::speclab::testing::WaitCli;
using ::speclab::testing::WaitUntil;

const std::string kRoot = SPECLAB_SOURCE_DIR;

absl::StatusOr<std::vector<SweepCell>> Expand(const std::string& yaml) {
  auto root = Options::FromString(yaml, "sweep.yaml");
  if (!root.ok()) return root.status();
  return ExpandSweep(*root);
}

constexpr char kBase[] =
    "decoding: {temperatures: [0], seed: 1}\n"
    "methods:\n"
    "  - {name: a, length_policy: {type: fixed, gamma: 2}}\n"
    "  - {name: b, tree_builder: {type: static, budget: 4}}\n";

constexpr char kSweep[] =
    "sweep:\n"
    "  grid:\n"
    "    methods[0].length_policy.gamma: [2, 4]\n"
    "    decoding.temperatures: [[0], [0, 1]]\n"
    "  zip:\n"
    "    methods[1].tree_builder.budget: [8, 16, 32]\n"
    "    methods[1].name: [b8, b16, b32]\n";

TEST(SweepTest, GridTimesZipInOrderWithStableNamesAndHashes) {
  auto cells = Expand(std::string(kBase) + kSweep);
  ASSERT_TRUE(cells.ok()) << cells.status();
  ASSERT_EQ(cells->size(), 2u * 2 * 3);
  const SweepCell& first = cells->front();
  EXPECT_EQ(first.name, "gamma=2,temperatures=_0_,budget=8,name=b8");
  EXPECT_THAT(first.values[1], ::testing::Pair("decoding.temperatures", "[0]"));
  const SweepCell& second = (*cells)[1];  // the zip varies fastest
  EXPECT_EQ(second.values[2].second, "16");
  EXPECT_EQ(second.values[3].second, "b16");
  const SweepCell& last = cells->back();
  EXPECT_EQ(last.name, "gamma=4,temperatures=_0__1_,budget=32,name=b32");
  // The resolved config: values set, the sweep block gone.
  Options config = last.config;
  EXPECT_FALSE(config.Has("sweep"));
  EXPECT_EQ(config.node()["methods"][0]["length_policy"]["gamma"].as<int>(), 4);
  EXPECT_EQ(config.node()["methods"][1]["tree_builder"]["budget"].as<int>(), 32);
  EXPECT_EQ(config.node()["methods"][1]["name"].as<std::string>(), "b32");
  std::set<std::string> hashes;
  for (const SweepCell& cell : *cells) hashes.insert(cell.hash);
  EXPECT_EQ(hashes.size(), cells->size());
  // Stable: the same config expands to the same names and hashes.
  auto again = Expand(std::string(kBase) + kSweep);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->back().FolderName(), last.FolderName());
  EXPECT_EQ(last.FolderName(), last.name + "-" + last.hash.substr(0, 8));
}

TEST(SweepTest, BadSweepsNameTheKey) {
  const std::string base = kBase;
  EXPECT_THAT(std::string(Expand(base + "sweep: {grid: {decoding.seed: []}}\n").status().message()),
              HasSubstr("'grid.decoding.seed': expected a non-empty list"));
  EXPECT_THAT(std::string(Expand(base + "sweep:\n  zip:\n    decoding.seed: [1, 2]\n    methods[0].name: [x]\n")
                              .status()
                              .message()),
              HasSubstr("'zip.methods[0].name': has 1 values, the zip's first list 2"));
  EXPECT_THAT(std::string(Expand(base + "sweep: {grids: {decoding.seed: [1]}}\n").status().message()),
              HasSubstr("'grids': unknown key"));
  EXPECT_THAT(std::string(Expand(base + "sweep:\n  grid:\n    methods[5].name: [x]\n").status().message()),
              HasSubstr("sweep key 'methods[5].name': 'methods' has no item 5 (it has 2)"));
  EXPECT_THAT(std::string(Expand(base + "sweep: {grid: {decoding.seed: [1, 1]}}\n").status().message()),
              HasSubstr("are the same config"));
  EXPECT_THAT(std::string(Expand(base + "sweep: {}\n").status().message()), HasSubstr("key 'sweep'"));
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// One CSV line's fields ("a,\"b,c\",d": three).
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// The rows of a merged summary.csv in the columns that do not depend on
// timing: the cell, its swept values, and what was decoded and accepted.
std::vector<std::string> UntimedColumns(const std::string& csv) {
  const std::vector<std::string> lines = Lines(csv);
  if (lines.empty()) return {};
  const std::vector<std::string> header = CsvFields(lines[0]);
  const std::set<std::string> timed = {"tokens_per_s", "speedup", "draft_share", "verify_share", "other_share",
                                       "predicted_speedup", "overhead_us_per_step"};
  std::vector<std::string> rows;
  for (const std::string& line : lines) {
    const std::vector<std::string> fields = CsvFields(line);
    std::string row;
    for (size_t i = 0; i < header.size(); ++i)
      if (!timed.count(header[i])) row += (i < fields.size() ? fields[i] : "?") + "|";
    rows.push_back(row);
  }
  return rows;
}

// Two cells of the quickstart: run whole, and as two shards into another
// store; a second run of the finished sweep decodes nothing; the merged
// summaries agree in everything but timings.
TEST(SweepTest, ShardsAndResumesFillOneStore) {
  const std::string base = ::testing::TempDir() + "/sweep_test_" + std::to_string(::getpid());
  RemoveTree(base);
  fs::create_directories(base);
  const std::string config = base + "/sweep.yaml";
  std::ofstream(config) << "name: sweep\n"
                        << "models: {target: " << kRoot << "/models/speclab-target, device: cpu, dtype: float32}\n"
                        << "prompts: {files: [" << kRoot << "/data/prompts/code.jsonl], per_task: 1}\n"
                        << "decoding: {temperatures: [0], max_new_tokens: 8, seed: 1}\n"
                        << "methods:\n"
                        << "  - name: pld\n"
                        << "    drafter: {type: prompt_lookup, max_ngram_size: 3, num_pred_tokens: 4}\n"
                        << "    verifier: {type: point_mass}\n"
                        << "    length_policy: {type: fixed, gamma: 2}\n"
                        << "sweep:\n"
                        << "  grid:\n"
                        << "    methods[0].length_policy.gamma: [2, 4]\n";
  RunFlags whole{.config_path = config, .out_dir = base + "/whole"};
  ASSERT_TRUE(RunExperiment(whole).ok());
  const std::string merged = FileText(fs::path(whole.out_dir) / "summary.csv");
  std::vector<std::string> lines = Lines(merged);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_THAT(lines[0], ::testing::StartsWith("cell,hash,methods[0].length_policy.gamma,method,"));
  EXPECT_THAT(merged, HasSubstr("\ngamma=2,"));
  EXPECT_THAT(merged, HasSubstr("\ngamma=4,"));
  // Finished cells are not decoded again.
  std::vector<std::pair<fs::path, fs::file_time_type>> written;
  for (const auto& cell : fs::directory_iterator(fs::path(whole.out_dir) / "cells"))
    written.push_back({cell.path() / "journal.jsonl", fs::last_write_time(cell.path() / "journal.jsonl")});
  ASSERT_EQ(written.size(), 2u);
  ASSERT_TRUE(RunExperiment(whole).ok());
  for (const auto& [journal, time] : written) EXPECT_EQ(fs::last_write_time(journal), time) << journal;

  RunFlags shard{.config_path = config, .out_dir = base + "/sharded", .shard_index = 1, .shard_count = 2};
  ASSERT_TRUE(RunExperiment(shard).ok());
  EXPECT_FALSE(fs::exists(fs::path(shard.out_dir) / "summary.csv"));  // cell 0 is the other shard's
  shard.shard_index = 0;
  ASSERT_TRUE(RunExperiment(shard).ok());
  EXPECT_EQ(UntimedColumns(FileText(fs::path(shard.out_dir) / "summary.csv")), UntimedColumns(merged));

  RunFlags no_store{.config_path = config};
  EXPECT_THAT(std::string(RunExperiment(no_store).message()), HasSubstr("a sweep needs --out DIR"));
  RemoveTree(base);
}

// The shipped sweep expands to the README's 8 cells (its Slurm array is 0-7),
// and every cell is a config the loader accepts.
TEST(SweepTest, TheShippedSweepLoadsInEveryCell) {
  auto root = Options::FromFileWithOverrides(kRoot + "/configs/experiments/gamma_sweep.yaml",
                                             {"models.device=cpu", "models.dtype=float32"});
  ASSERT_TRUE(root.ok()) << root.status();
  auto cells = ExpandSweep(*root);
  ASSERT_TRUE(cells.ok()) << cells.status();
  ASSERT_EQ(cells->size(), 8u);
  EXPECT_EQ(cells->front().name, "gamma=2,temperatures=_0_");
  for (SweepCell& cell : *cells) {
    Options config = cell.config;
    auto experiment = LoadExperiment(config);
    EXPECT_TRUE(experiment.ok()) << cell.name << ": " << experiment.status();
  }
}

// A sweep killed with SIGKILL part way is finished by the same command and
// ends with the store of a sweep that was never interrupted (but timings).
TEST(SweepTest, AKilledSweepEndsWithTheUninterruptedStore) {
  const std::string base = ::testing::TempDir() + "/sweep_kill_test_" + std::to_string(::getpid());
  RemoveTree(base);
  fs::create_directories(base);
  auto args = [&](const std::string& out) {
    return std::vector<std::string>{"run",   kRoot + "/configs/experiments/gamma_sweep.yaml",
                                    "--set", "models.device=cpu",
                                    "--set", "models.dtype=float32",
                                    "--set", "prompts.per_task=1",
                                    "--set", "decoding.max_new_tokens=8",
                                    "--out", out};
  };
  const std::string killed = base + "/killed";
  auto finished_cells = [&] {
    int n = 0;
    if (fs::exists(fs::path(killed) / "cells"))
      for (const auto& cell : fs::directory_iterator(fs::path(killed) / "cells"))
        n += fs::exists(cell.path() / "summary.csv");
    return n;
  };
  const pid_t pid = StartCli(args(killed), base + "/killed.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  WaitUntil([&] { return finished_cells() >= 2; }, deadline);
  ::kill(pid, SIGKILL);
  EXPECT_EQ(WaitCli(pid), -SIGKILL);
  const int done = finished_cells();
  ASSERT_GE(done, 2) << FileText(base + "/killed.log");
  ASSERT_LT(done, 8) << "the sweep finished before it could be killed";
  EXPECT_FALSE(fs::exists(fs::path(killed) / "summary.csv"));

  ASSERT_EQ(WaitCli(StartCli(args(killed), base + "/again.log")), 0) << FileText(base + "/again.log");
  EXPECT_THAT(FileText(base + "/again.log"), HasSubstr("finished earlier"));
  ASSERT_EQ(WaitCli(StartCli(args(base + "/whole"), base + "/whole.log")), 0) << FileText(base + "/whole.log");
  const std::string merged = FileText(base + "/whole/summary.csv");
  EXPECT_EQ(Lines(merged).size(), 1 + 8 * 2 * 5u);  // header; cells x (baseline, method) x (4 tasks, all)
  EXPECT_EQ(UntimedColumns(FileText(killed + "/summary.csv")), UntimedColumns(merged));
  RemoveTree(base);
}

}  // namespace
}  // namespace speclab
