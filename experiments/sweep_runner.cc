#include "experiments/sweep_runner.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/csv_table.h"
#include "experiments/progress.h"
#include "framework/core/file_util.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;

std::string CellFolder(const std::string& dir, const SweepCell& cell) {
  return (fs::path(dir) / "cells" / cell.FolderName()).string();
}

bool Finished(const std::string& dir, const SweepCell& cell) {
  return fs::exists(fs::path(CellFolder(dir, cell)) / "summary.csv");
}

}  // namespace

absl::Status MergeSweepSummaries(const std::string& dir, const std::vector<SweepCell>& cells) {
  std::string merged, header;
  for (const SweepCell& cell : cells) {
    const std::string path = (fs::path(CellFolder(dir, cell)) / "summary.csv").string();
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open (is the cell finished?)"));
    std::string line;
    if (!std::getline(in, line)) return absl::DataLossError(absl::StrCat(path, ": empty"));
    if (header.empty()) {
      header = line;
      std::vector<std::string> columns = {"cell", "hash"};
      for (const auto& [key, value] : cell.values) columns.push_back(CsvField(key));
      absl::StrAppend(&merged, absl::StrJoin(columns, ","), ",", header, "\n");
    } else if (line != header) {
      return absl::DataLossError(absl::StrCat(path, ": its columns differ from the other cells' (another speclab?)"));
    }
    std::vector<std::string> prefix = {CsvField(cell.name), cell.hash};
    for (const auto& [key, value] : cell.values) prefix.push_back(CsvField(value));
    const std::string front = absl::StrJoin(prefix, ",");
    while (std::getline(in, line))
      if (!line.empty()) absl::StrAppend(&merged, front, ",", line, "\n");
  }
  return WriteFileAtomically((fs::path(dir) / "summary.csv").string(), merged);
}

absl::Status RunSweep(const Options& root, const RunFlags& flags) {
  if (flags.out_dir.empty())
    return absl::InvalidArgumentError("a sweep needs --out DIR: its result store, one folder per cell");
  if (!flags.trace_dir.empty()) return absl::InvalidArgumentError("--trace traces one run, not a sweep");
  auto cells = ExpandSweep(root);
  if (!cells.ok()) return cells.status();
  std::error_code error;
  fs::create_directories(fs::path(flags.out_dir) / "cells", error);
  if (error) return absl::PermissionDeniedError(absl::StrCat("--out ", flags.out_dir, ": cannot create: ",
                                                             error.message()));
  const int count = static_cast<int>(cells->size());
  std::cerr << absl::StrFormat("speclab: sweep of %d cells into %s (shard %d/%d)\n", count, flags.out_dir,
                               flags.shard_index, flags.shard_count);
  for (int k = 0; k < count; ++k) {
    if (k % flags.shard_count != flags.shard_index) continue;
    const SweepCell& cell = (*cells)[k];
    if (!flags.overwrite && Finished(flags.out_dir, cell)) {
      std::cerr << absl::StrFormat("speclab: cell %d/%d %s: finished earlier\n", k + 1, count, cell.name);
      continue;
    }
    if (Interrupted())
      return absl::CancelledError("interrupted between cells; every finished cell is kept: the same command "
                                  "finishes the sweep");
    std::cerr << absl::StrFormat("speclab: cell %d/%d %s\n", k + 1, count, cell.name);
    RunFlags cell_flags{.config_path = flags.config_path, .out_dir = CellFolder(flags.out_dir, cell),
                        .overwrite = flags.overwrite, .resume = !flags.overwrite};
    absl::Status run = RunResolvedExperiment(cell.config, cell_flags);
    if (absl::IsCancelled(run))
      return absl::CancelledError(absl::StrCat("interrupted in cell ", cell.name, "; every finished cell and prompt ",
                                               "is kept: the same command finishes the sweep"));
    if (!run.ok()) return absl::Status(run.code(), absl::StrCat("sweep cell ", cell.name, ": ", run.message()));
  }
  int finished = 0;
  for (const SweepCell& cell : *cells) finished += Finished(flags.out_dir, cell);
  if (finished < count) {
    std::cerr << absl::StrFormat("speclab: %d of %d cells finished; %s/summary.csv is written by the run that "
                                 "finds them all finished (the other shards, or this command again)\n",
                                 finished, count, flags.out_dir);
    return absl::OkStatus();
  }
  if (absl::Status merged = MergeSweepSummaries(flags.out_dir, *cells); !merged.ok()) return merged;
  std::cerr << "speclab: wrote " << flags.out_dir << "/summary.csv (" << count << " cells)\n";
  return absl::OkStatus();
}

}  // namespace speclab
