// Sweeps: one experiment config, many cells.
//
// An experiment YAML with a `sweep:` block runs once per cell:
//
//   sweep:
//     grid:                                   # every combination
//       methods[0].length_policy.gamma: [2, 4, 8]
//       decoding.temperatures: [[0], [1]]
//     zip:                                    # lists of one length, walked together
//       methods[1].tree_builder.budget: [8, 16]
//       methods[1].name: [tree8, tree16]
//
// Keys are --set paths (list items by index). The cells are the product of
// the grid's lists and the zip (one dimension); each is the config with those
// values set and the sweep block removed, named by its values and identified
// by a hash of its resolved text, so that a cell's folder in the result store
// (experiments/sweep_runner.h) stays the same across runs, shards and
// machines, and changes when anything it decodes changes.
#ifndef SPECLAB_EXPERIMENTS_SWEEP_H_
#define SPECLAB_EXPERIMENTS_SWEEP_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/core/options.h"

namespace speclab {

struct SweepCell {
  // The swept keys and their values as YAML flow text, in the sweep's order.
  std::vector<std::pair<std::string, std::string>> values;
  std::string name;  // "gamma=4,temperatures=_0_": [A-Za-z0-9._+-] kept, the rest '_'
  std::string hash;  // 16 hex digits of the resolved config's text
  Options config;    // the resolved config (no sweep block)

  // The cell's folder in the result store: NAME-HASH8.
  std::string FolderName() const;
};

// The cells of `root`'s sweep block, in order: the dimensions are the grid's
// keys, then the zip, and the last varies fastest. Errors name the sweep key
// at fault.
absl::StatusOr<std::vector<SweepCell>> ExpandSweep(const Options& root);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_SWEEP_H_
