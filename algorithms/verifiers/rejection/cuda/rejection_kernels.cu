// See rejection_kernels.h.
#include "algorithms/verifiers/rejection/cuda/rejection_kernels.h"

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace rejection_kernels {
namespace {

using namespace row_reduce;  // NOLINT: the row kernels' shared reductions

__global__ void RejectionAccepted(const int64_t* __restrict__ tokens, const float* __restrict__ p,
                                  const float* __restrict__ q, const float* __restrict__ u, int64_t* __restrict__ out,
                                  int64_t rows, int64_t cols) {
  if (threadIdx.x != 0) return;
  int64_t accepted = 0;
  while (accepted < rows - 1) {
    const int64_t x = tokens[accepted + 1];
    if (!(u[accepted] * q[(accepted + 1) * cols + x] < p[accepted * cols + x])) break;
    ++accepted;
  }
  out[0] = accepted;
}

}  // namespace

int LaunchRejectionAccepted(const int64_t* tokens, const float* p, const float* q, const float* u, int64_t* out,
                            int64_t rows, int64_t cols, void* stream) {
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  RejectionAccepted<<<1, kWarpSize, 0, static_cast<cudaStream_t>(stream)>>>(tokens, p, q, u, out, rows, cols);
  return cudaGetLastError();
}

}  // namespace rejection_kernels
}  // namespace speclab
