// The chain rules' stopping token (rejection's and block's residual), on CUDA.
// Torch-free, as framework/model/cuda/row_kernels.h: device pointers to
// contiguous data, `stream` a cudaStream_t; asynchronous, allocating
// nothing, never synchronising (graph-capturable); returns a cudaError_t.
// Workspace sizes count row_kernels::RowChunks(cols).
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_RESIDUAL_RACE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_RESIDUAL_RACE_H_

#include <cstdint>

namespace speclab {
namespace residual_race_kernels {

// The stopping token of chain rejection sampling for the stopping row
// r = *row (on the device), raced with noise: the first index of the largest
// s[i] / max(noise[r][i], FLT_MIN), where s = max(w p[r] - q[r + 1], 0) for
// r < rows - 1 and s = p[r] for the last row; where s has no positive entry
// (w p[r] <= q[r + 1] everywhere), of p[r][i] / max(noise[r][i], FLT_MIN)
// instead. w = weights[r] (block verification's), 1 where weights is null.
// p, q, noise [rows, cols] float32; weights [rows] float32 or null; out [1]
// int64; workspace: 3 * RowChunks(cols) uint64 values. 1 <= cols < 2^32.
int LaunchResidualRace(const float* p, const float* q, const float* noise, const int64_t* row, const float* weights,
                       int64_t* out, uint64_t* workspace, int64_t rows, int64_t cols, void* stream);

}  // namespace residual_race_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_RESIDUAL_RACE_H_
