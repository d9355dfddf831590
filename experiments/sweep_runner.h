// The result store of a sweep (experiments/sweep.h): `speclab run SWEEP.yaml
// --out DIR [--shard i/n]` runs each cell into DIR/cells/NAME-HASH/, a run
// folder of its own (config, journal, records, summary). A finished cell is
// skipped and a killed one resumed, so a sweep stopped at any point (SIGKILL
// included) is finished by running the same command again. Shards run the
// cells k with k % n == i, in separate processes or on separate GPUs, into
// the same store; once every cell is finished, the run that sees it writes
// DIR/summary.csv: every cell's rows with the cell's name, hash and swept
// values in front.
#ifndef SPECLAB_EXPERIMENTS_SWEEP_RUNNER_H_
#define SPECLAB_EXPERIMENTS_SWEEP_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "experiments/experiment.h"
#include "experiments/sweep.h"
#include "framework/core/options.h"

namespace speclab {

// Runs this shard's cells of `root`'s sweep into flags.out_dir.
absl::Status RunSweep(const Options& root, const RunFlags& flags);

// DIR/summary.csv from the cells' own summaries (every cell finished).
absl::Status MergeSweepSummaries(const std::string& dir, const std::vector<SweepCell>& cells);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_SWEEP_RUNNER_H_
