// best_first's growth on the device: the rule of BestFirstTreeBuilder::Build
// (best_first_tree_builder.cc) as fixed-shape tensor work, for a LevelPick
// with free parents (LevelPick::Choice::depths), so that a whole tree grows
// inside one CUDA graph. ATen only: no host reads, no RNG.
//
// Each growth iteration is one level of the drafter's ForwardLevels: the
// level's `beams` rows (the root alone at level 0) propose their children
// (Grow), and the best unexpanded entries become the next level's beams
// (ChooseBeams). Where the host loop would stop, `stopped` is set and later
// levels add and feed nothing (their rows are fed as dummies, whose logits
// are ignored).
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_BEST_FIRST_BEST_FIRST_GROWTH_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_BEST_FIRST_BEST_FIRST_GROWTH_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace speclab::best_first {

struct Rule {
  int64_t budget = 1;       // B: drafted nodes kept (root excluded)
  int64_t beams = 1;        // W: rows fed a level, min(max_n_beams, B)
  int64_t iterations = 2;   // growth iterations (levels + 1)
  int64_t branch = 1;       // max_branch_width: children proposed a row
  double log_decay = 0;     // log(decay_factor)
  double min_log_prob = 0;  // children scoring below are dropped (the root's best child excepted)
};

// The pool of grown entries, in growth order (topological), and the loop's
// state. Entry P (the last) is a sink for writes that keep nothing.
struct Growth {
  at::Tensor tokens;   // [P + 1] int64
  at::Tensor parents;  // [P + 1] int64: the parent's entry, -1 under the root
  at::Tensor scores;   // [P + 1] float64: cumulative score
  at::Tensor depths;   // [P + 1] int64: 1 under the root
  at::Tensor fed;      // [P + 1] int64: the node number it was fed as (LevelPick's numbering), -1 if unexpanded
  at::Tensor count;    // [1] int64: entries grown
  at::Tensor stopped;  // [1] bool: the host loop would have stopped
  at::Tensor beams;    // [W] int64: the entries this level feeds, in entry order, -1 for a dummy row

  // As a LevelPick's carry, and back.
  std::vector<at::Tensor> ToCarry() const;
  static Growth FromCarry(const std::vector<at::Tensor>& carry);
};

// An empty pool of iterations * budget entries (each iteration keeps at
// most B) on `device`.
Growth StartGrowth(const Rule& rule, c10::Device device);

// Adds the children the level's rows propose: top_tokens [R, w] int64 and
// their log q top_logq [R, w] float32, best first (R = 1 at level 0, the
// root's row; else R = W, row i the children of beams[i]). Scores are
// parent + log_decay + log q in float64. Stops where nothing passes
// min_log_prob, or where the pool holds B entries and no child beats its
// B-th best; otherwise keeps the children among the B best of pool and
// children (ties: the earlier, the pool first), appended in row order.
void Grow(const Rule& rule, Growth& growth, const at::Tensor& top_tokens, const at::Tensor& top_logq, bool root);

// The next level's feed: the (at most W) best unexpanded entries (ties: the
// earlier), in entry order, numbered 1 + level * W + j as LevelPick counts
// fed nodes, after the level `level` that just grew. Sets growth.beams.
struct Feed {
  at::Tensor tokens;   // [W] int64
  at::Tensor parents;  // [W] int64: the node number each extends (0: the root)
  at::Tensor depths;   // [W] int64
};
Feed ChooseBeams(const Rule& rule, Growth& growth, int64_t level);

// The draft: the B best entries in entry order (ties: the earlier), then,
// where fewer than B grew, copies of the first (the root's best child, which
// every verifier of deterministic drafts tries first, so a copy is never
// accepted): tokens [B] and the tree's parents [B + 1] (-1 for the root).
struct Kept {
  at::Tensor tokens;
  at::Tensor parents;
};
Kept KeepBest(const Rule& rule, const Growth& growth);

// One level: Grow, then ChooseBeams (but at the last level, level + 1 ==
// iterations) and KeepBest, the draft so far. One launch on CUDA
// (cuda/growth_kernels.h) where the pool and the children fit a block
// (iterations * B + rows * width <= 1024); the functions above, the
// reference, elsewhere.
struct Level {
  Feed feed;  // all but the last level
  Kept kept;
};
Level GrowLevel(const Rule& rule, Growth& growth, const at::Tensor& top_tokens, const at::Tensor& top_logq,
                int64_t level);

}  // namespace speclab::best_first

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_BEST_FIRST_BEST_FIRST_GROWTH_H_
