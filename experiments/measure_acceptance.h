// `speclab measure-acceptance EXPERIMENT.yaml --out FILE`: measures what the
// `sequoia` tree builder needs (docs/algorithms.md §2.5).
//
//  - The positional acceptance vector p_k = P(the k-th sampled child is the
//    accepted one): the experiment's target and the drafter of its FIRST
//    method decode the experiment's prompts with a depth-1 tree of `width`
//    children drawn without replacement, verified with rrs_wor (the rule
//    Sequoia's trees are verified with); every step records which rank was
//    accepted, if any. p_k is the fraction of steps that accepted rank k.
//  - A latency profile: the target's forward time t(n) over a tree of n
//    tokens on top of a prompt (n = 1, 2, 4, ..., 128 by default) and the
//    drafter's forward time over one tree level of `width` nodes (medians).
//
// The YAML written holds `acceptance` (for sequoia's acceptance_file) and
// `latency_profile` (for its latency_profile_file), plus the counts behind
// them. Only the first method is built, so a config may hold later methods
// that read the file this writes (cost_aware, sequoia). Settings come from an
// optional `measure_acceptance:` mapping of the experiment config:
//   width (8), temperature (the largest of decoding.temperatures; must be > 0),
//   budgets ([1, 2, 4, ..., 128]), repeats (20 timed forwards per size).
#ifndef SPECLAB_EXPERIMENTS_MEASURE_ACCEPTANCE_H_
#define SPECLAB_EXPERIMENTS_MEASURE_ACCEPTANCE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace speclab {

absl::Status RunMeasureAcceptance(const std::string& experiment_config, const std::vector<std::string>& overrides,
                                  const std::string& out_yaml);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_MEASURE_ACCEPTANCE_H_
