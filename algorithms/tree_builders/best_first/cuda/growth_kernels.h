// best_first's growth level on CUDA: Grow, then ChooseBeams or KeepBest
// (best_first_growth.h), as one launch of one block. Torch-free, as
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
// level's children. Not last: out_tokens, out_parents, out_depths [W] (the
// next feed). Last: out_tokens [B] and out_parents [B + 1] (out_depths
// unused). P + rows * width <= kMaxItems, B <= P.
int LaunchGrowLevel(const int64_t* top_tokens, const float* top_logq, int rows, int width, Pool pool, LevelRule rule,
                    int64_t* out_tokens, int64_t* out_parents, int64_t* out_depths, void* stream);

}  // namespace growth_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_BEST_FIRST_CUDA_GROWTH_KERNELS_H_
