// One level of a fixed-shape tree (static, sequoia) written into the draft's
// buffers.
//
// A level's children are its fed rows' ranked tokens at fixed places, each
// sampled child keeps its parent's q row, and the next level is fed some of
// the children. Inside the drafter's graph that is three gathers a level; on
// CUDA one kernel (cuda/level_children.h) does them in one launch, with the
// same values.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_LEVEL_CHILDREN_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_LEVEL_CHILDREN_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace speclab::tree_builders {

struct LevelGather {
  at::Tensor by_rank;      // [rows * rank span] int64: each fed row's tokens, best (or first drawn) first
  at::Tensor flat;         // [count] int64: child j's place in by_rank
  at::Tensor children;     // [count] int64, written: child j's token
  at::Tensor q;            // [rows, vocab] float32: the fed rows' q; undefined where not sampled
  at::Tensor parent_rows;  // [count] int64: child j's fed row (read with q)
  at::Tensor q_rows;       // [count, vocab] float32, written with q: child j's parent's q row
  at::Tensor feed;         // [width] int64: the children fed next, as indices into `children`; undefined: none
  int64_t width = 0;       // the fed tokens' count
};

// Writes the children (and their q rows); returns the next level's fed
// tokens [width]: children[feed[w]], or zeros where feed is undefined.
at::Tensor GatherLevelChildren(const LevelGather& level);

// The ATen reference, which GatherLevelChildren runs where the kernel does not.
at::Tensor GatherLevelChildrenAten(const LevelGather& level);

}  // namespace speclab::tree_builders

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_LEVEL_CHILDREN_H_
