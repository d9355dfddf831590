// best_first's growth level on CUDA: Grow, then ChooseBeams (but at the last
// level) and KeepBest (best_first_growth.h), as one launch of one block. Torch-free, as
// framework/model/cuda/tree_kernels.h: device pointers to contiguous data,
// `stream` a cudaStream_t; asynchronous, allocating nothing, never
// synchronising (graph-capturable); returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_BEST_FIRST_CUDA_GROWTH_KERNELS_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_BEST_FIRST_CUDA_GROWTH_KERNELS_H_

#include <cstdint>

namespace speclab {
namespace growth_kernels {

// The most pool entries plus children one launch handles.
constexpr int64_t kMaxItems = 1024;

struct Pool {
  int64_t* tokens;   // [P + 1]
  int64_t* parents;  // [P + 1]
  double* scores;    // [P + 1]
  int64_t* depths;   // [P + 1]
  int64_t* fed;      // [P + 1]
  int64_t* count;    // [1]
  bool* stopped;     // [1]
  int64_t* beams;    // [W]
  int pool;          // P
};

struct LevelRule {
  int budget;  // B
  int beams;   // W
  int level;
  bool root;  // level 0: one row, the root's
  bool last;  // KeepBest instead of ChooseBeams
  double log_decay;
  double min_log_prob;
};

// top_tokens [rows, width] int64 and top_logq [rows, width] float32: the
// level's children. Not last: feed_tokens, feed_parents, feed_depths [W]
// (the next feed; unused at the last level). Always: kept_tokens [B] and
// kept_parents [B + 1], the draft so far. P + rows * width <= kMaxItems,
// B <= P.
int LaunchGrowLevel(const int64_t* top_tokens, const float* top_logq, int rows, int width, Pool pool, LevelRule rule,
                    int64_t* feed_tokens, int64_t* feed_parents, int64_t* feed_depths, int64_t* kept_tokens,
                    int64_t* kept_parents, void* stream);

}  // namespace growth_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_BEST_FIRST_CUDA_GROWTH_KERNELS_H_
