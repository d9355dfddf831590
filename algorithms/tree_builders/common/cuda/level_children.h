// One level of a fixed-shape tree gathered into the draft's buffers, on CUDA
// (see ../level_children.h). Torch-free, as framework/model/cuda/row_kernels.h:
// device pointers to contiguous data, `stream` a cudaStream_t; asynchronous,
// allocating nothing, never synchronising (graph-capturable); returns a
// cudaError_t.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_LEVEL_CHILDREN_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_LEVEL_CHILDREN_H_

#include <cstdint>

namespace speclab {
namespace level_children_kernels {

// children[j] = by_rank[flat[j]] for j < count; where q is not null,
// q_rows[j][:] = q[parent_rows[j]][:] (rows of `vocab` floats); fed[w] =
// by_rank[flat[feed[w]]] for w < width (0 where feed is null). 1 <= count <=
// 65535, 0 <= width <= 1024.
int LaunchLevelChildren(const int64_t* by_rank, const int64_t* flat, int64_t* children, int64_t count,
                        const float* q, const int64_t* parent_rows, float* q_rows, int64_t vocab,
                        const int64_t* feed, int64_t* fed, int64_t width, void* stream);

}  // namespace level_children_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_CUDA_LEVEL_CHILDREN_H_
