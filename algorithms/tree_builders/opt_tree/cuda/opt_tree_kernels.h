// opt_tree's level on CUDA (opt_tree_levels.h): the level's N best children
// joining the pool, the threshold rule's judgement, the next feed and the
// tree kept so far, as one launch of one block. Torch-free, as
// framework/model/cuda/tree_kernels.h: device pointers to contiguous data,
// `stream` a cudaStream_t; asynchronous, allocating nothing, never
// synchronising (graph-capturable); returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_OPT_TREE_CUDA_OPT_TREE_KERNELS_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_OPT_TREE_CUDA_OPT_TREE_KERNELS_H_

#include <cstdint>

namespace speclab {
namespace opt_tree_kernels {

// The most pool entries (depth * N) and children (rows * N) one launch handles.
constexpr int64_t kMaxItems = 1024;

// opt_tree_levels.h's Growth.
struct Pool {
  int64_t* tokens;   // [depth * N]
  int64_t* parents;  // [depth * N]
  double* scores;    // [depth * N]
  double* previous;  // [1]
  int64_t* kept;     // [1]
  bool* go;          // [1]
};

struct LevelRule {
  int nodes;  // N
  int depth;
  int level;
  double threshold;
};

// top_tokens [rows, N] int64 and top_logq [rows, N] float32 (rows = 1 at
// level 0, else N): the level's children. Not last (level + 1 < depth):
// feed_tokens and feed_rows [N], the next feed (else unused). Always:
// kept_tokens [N] and kept_parents [N + 1], the tree kept so far.
int LaunchGrowLevel(const int64_t* top_tokens, const float* top_logq, int rows, Pool pool, LevelRule rule,
                    int64_t* feed_tokens, int64_t* feed_rows, int64_t* kept_tokens, int64_t* kept_parents,
                    void* stream);

}  // namespace opt_tree_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_OPT_TREE_CUDA_OPT_TREE_KERNELS_H_
