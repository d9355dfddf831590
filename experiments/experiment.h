// Experiment: a YAML config of models, prompts, decoding settings and methods,
// run as `speclab run EXPERIMENT.yaml [--set key.path=value ...] [--out DIR]`.
//
// The autoregressive baseline and every method decode the same prompts in one
// process; the result is one Markdown table per task and temperature, and
// with --out: config.resolved.yaml, git_revision.txt, steps.pb (per-step
// records), summary.csv and outputs.jsonl; with --trace, Kineto traces of one
// generation per method (experiments/device_trace.h).
#ifndef SPECLAB_EXPERIMENTS_EXPERIMENT_H_
#define SPECLAB_EXPERIMENTS_EXPERIMENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace speclab {

struct RunFlags {
  std::string config_path;
  std::vector<std::string> overrides;  // "a.b=value"
  std::string out_dir;                 // empty: print only
  // Non-empty: after the timed runs, one untimed generation per method and
  // temperature (first prompt) is traced into DIR/<method>_T<t>.json.
  std::string trace_dir;
};

absl::Status RunExperiment(const RunFlags& flags);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_EXPERIMENT_H_
