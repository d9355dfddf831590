// Block verification's stopping point, on CUDA.
// Torch-free, as framework/model/cuda/row_kernels.h: device pointers to
// contiguous data, `stream` a cudaStream_t; asynchronous, allocating
// nothing, never synchronising (graph-capturable); returns a cudaError_t.
// Workspace sizes count row_kernels::RowChunks(cols).
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_BLOCK_CUDA_BLOCK_KERNELS_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_BLOCK_CUDA_BLOCK_KERNELS_H_

#include <cstdint>

namespace speclab {
namespace block_kernels {

// Block verification's stopping point (docs/algorithms.md §1.9) for a
// chain of gamma = rows - 1 drafts x_i = tokens[i]: weights[i] = w_i =
// min(1, w_{i-1} p[i-1][x_i] / q[i][x_i]) (w_0 = 1, computed as exp(L_i -
// max_{j<=i} L_j) with L the running sum of log ratios), h_i = m_i / (m_i + 1
// - w_i) with m_i the mass of (w_i p[i] - q[i + 1])+ for 0 < i < gamma (1
// where the denominator is not positive), h_gamma = w_gamma; out = the
// largest i in 1..gamma with u[i - 1] < h_i, or 0. tokens [rows] int64; p, q
// [rows, cols] float32; u [rows - 1] float32; out [1] int64; weights [rows]
// float32; workspace: max(1, rows - 2) * RowChunks(cols) floats. rows >= 2.
// Two launches (one when rows == 2).
int LaunchBlockAccepted(const int64_t* tokens, const float* p, const float* q, const float* u, int64_t* out,
                        float* weights, float* workspace, int64_t rows, int64_t cols, void* stream);

}  // namespace block_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_BLOCK_CUDA_BLOCK_KERNELS_H_
