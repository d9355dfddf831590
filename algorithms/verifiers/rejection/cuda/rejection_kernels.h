// The chain rejection rule's count of accepted drafts, on CUDA.
// Torch-free, as framework/model/cuda/row_kernels.h: device pointers to
// contiguous data, `stream` a cudaStream_t; asynchronous, allocating
// nothing, never synchronising (graph-capturable); returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_REJECTION_CUDA_REJECTION_KERNELS_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_REJECTION_CUDA_REJECTION_KERNELS_H_

#include <cstdint>

namespace speclab {
namespace rejection_kernels {

// The drafts chain rejection sampling accepts before its first rejection:
// the largest a <= rows - 1 with u[i] * q[i + 1][x] < p[i][x] for every
// i < a, where x = tokens[i + 1]. tokens [rows] int64; p, q [rows, cols]
// float32; u [rows - 1] float32; out [1] int64. One block.
int LaunchRejectionAccepted(const int64_t* tokens, const float* p, const float* q, const float* u, int64_t* out,
                            int64_t rows, int64_t cols, void* stream);

}  // namespace rejection_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_REJECTION_CUDA_REJECTION_KERNELS_H_
