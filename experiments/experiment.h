// Experiment: a YAML config of models, prompts, decoding settings and methods,
// run as `speclab run EXPERIMENT.yaml [--set key.path=value ...] [--out DIR]`.
//
// The autoregressive baseline and every method decode the same prompts in one
// process; the result is one Markdown table per task and temperature, and
// with --out: config.resolved.yaml and git_revision.txt first, journal.jsonl
// as it goes (each finished prompt durable on disk: experiments/run_journal.h),
// and at the end steps.pb (per-step records), outputs.jsonl, prompts.jsonl
// and summary.csv; with --trace, Kineto traces of one
// generation per method (experiments/device_trace.h).
#ifndef SPECLAB_EXPERIMENTS_EXPERIMENT_H_
#define SPECLAB_EXPERIMENTS_EXPERIMENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "framework/core/options.h"

namespace speclab {

struct RunFlags {
  std::string config_path;
  std::vector<std::string> overrides;  // "a.b=value"
  std::string out_dir;                 // empty: print only
  // A folder that already holds a run (its summary.csv or resolved config)
  // is refused unless this is set; then its files are replaced.
  bool overwrite = false;
  // Finish the run a folder holds (killed, or stopped by an error): the
  // prompts its journal records as done are read back, not decoded again.
  // The resolved config must be the one the folder's run had.
  bool resume = false;
  // A sweep's cells k with k % shard_count == shard_index (--shard i/n).
  int shard_index = 0;
  int shard_count = 1;
  // Non-empty: after the timed runs, one untimed generation per method and
  // temperature (first prompt) is traced into DIR/<method>_T<t>.json.
  std::string trace_dir;
};

// Runs the config at flags.config_path with its overrides: one run, or with
// a `sweep:` block every cell of it (experiments/sweep_runner.h).
absl::Status RunExperiment(const RunFlags& flags);

// Runs one resolved config (no sweep block) into flags.out_dir.
absl::Status RunResolvedExperiment(Options root, const RunFlags& flags);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_EXPERIMENT_H_
