// opt_tree's growth on the device: the threshold rule of OptTreeBuilder
// (opt_tree_builder.cc) as fixed-shape tensor work, one LevelPick level per
// drafter forward, so that a whole tree grows inside the drafter's one CUDA
// graph with no host read. No host reads, no RNG.
//
// Level 0 pools the root's N most probable tokens; at each later level the N
// frontier nodes (the last level's pool entries) propose their N most
// probable children each, and the N best of the N² join the pool and form
// the next frontier: the pool holds the levels' N nodes each, level by
// level, as the host's does. After level d the rule weighs E_d, the weights
// exp(score) of the N heaviest pool entries, and growth goes on while d <
// depth and E_d − E_{d−1} > threshold (LevelPick::Choice::go: a model skips
// the levels past the stop). Each level keeps the N heaviest entries of the
// levels grown up to the stop: the draft so far, which the last level's is.
//
// The same tree as the host loop's: the same float32 log-probabilities
// summed in double, ties to the earlier entry, E_d summed heaviest first.
// (Only exp may round differently from the host's in the last place, so a
// gain within an ulp of the threshold may be judged otherwise.) One launch a
// level on CUDA (cuda/opt_tree_kernels.h) for N <= 32 and depth * N <= 1024;
// ATen elsewhere.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_OPT_TREE_OPT_TREE_LEVELS_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_OPT_TREE_OPT_TREE_LEVELS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "framework/device/device_model.h"

namespace speclab::opt_tree {

struct Rule {
  int64_t nodes = 1;     // N: the frontier's width and the nodes kept
  int64_t depth = 2;     // the most levels grown: a pick of depth - 1 levels after the root's
  double threshold = 0;  // δ: the gain in expected accepted tokens a level must bring
};

// The pick of LevelPick level `level` (0: the root's row logits [1, vocab];
// else the frontier's [N, vocab]): the next frontier (but at level
// depth - 1), whether growth goes on, and the tree kept so far
// (tree_builders::KeptOnDevice's tensors).
LevelPick::Choice GrowLevel(const Rule& rule, int64_t level, const at::Tensor& logits,
                            const std::vector<at::Tensor>& carry);

}  // namespace speclab::opt_tree

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_OPT_TREE_OPT_TREE_LEVELS_H_
