// See block_kernels.h.
#include "algorithms/verifiers/block/cuda/block_kernels.h"

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace block_kernels {
namespace {

using namespace row_reduce;  // NOLINT: the row kernels' shared reductions

// Block verification's weight w_i = exp(L_i - max_{j<=i} L_j), L_0 = 0 and
// L_j = L_{j-1} + log(p[j-1][x_j] / q[j][x_j]) (log 0 = -inf where q is 0),
// in the ATen formula's order of float operations.
__device__ float BlockWeight(const int64_t* __restrict__ tokens, const float* __restrict__ p,
                             const float* __restrict__ q, int64_t cols, int64_t i) {
  float log_weight = 0.0f, running_max = 0.0f;
  for (int64_t j = 1; j <= i; ++j) {
    const int64_t x = tokens[j];
    const float qx = q[j * cols + x];
    log_weight += logf(qx > 0.0f ? p[(j - 1) * cols + x] / qx : 0.0f);
    running_max = fmaxf(running_max, log_weight);
  }
  return expf(log_weight - running_max);
}

// Grid (chunks, rows - 2): block (c, i - 1) writes the sum over chunk c of
// r_i = (w_i p[i] - q[i + 1])+, i = 1..rows - 2 (w_i p rounded before the
// subtraction, as ATen rounds it).
__global__ void BlockMassChunks(const int64_t* __restrict__ tokens, const float* __restrict__ p,
                                const float* __restrict__ q, float* __restrict__ partials, int64_t cols) {
  const int64_t i = blockIdx.y + 1, chunk = blockIdx.x;
  __shared__ float weight;
  if (threadIdx.x == 0) weight = BlockWeight(tokens, p, q, cols, i);
  __syncthreads();
  const int64_t begin = chunk * kRowChunk;
  const int64_t end = min(begin + kRowChunk, cols);
  const float* pr = p + i * cols;
  const float* qr = q + (i + 1) * cols;
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kRowChunk / kThreads; ++k) {
    const int64_t c = begin + threadIdx.x + k * kThreads;
    if (c < end) sum += fmaxf(__fmul_rn(weight, pr[c]) - qr[c], 0.0f);
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.y * gridDim.x + chunk] = sum;
}

// One warp: every weight, each position's h_i (mass_i / (mass_i + 1 - w_i),
// 1 where that has no denominator; h_gamma = w_gamma), its draw u < h, and the
// largest position drawn (0 if none: h_0 = 1).
__global__ void BlockAcceptedFinish(const int64_t* __restrict__ tokens, const float* __restrict__ p,
                                    const float* __restrict__ q, const float* __restrict__ u,
                                    const float* __restrict__ partials, int64_t chunks, int64_t* __restrict__ out,
                                    float* __restrict__ weights, int64_t rows, int64_t cols) {
  const int64_t gamma = rows - 1;
  const int lane = threadIdx.x;
  for (int64_t i = lane; i <= gamma; i += kWarpSize) weights[i] = BlockWeight(tokens, p, q, cols, i);
  __syncwarp();
  int64_t accepted = 0;
  for (int64_t i = 1; i <= gamma; ++i) {
    float h = weights[gamma];
    if (i < gamma) {
      float mass = 0.0f;
      for (int64_t c = lane; c < chunks; c += kWarpSize) mass += partials[(i - 1) * chunks + c];
      for (int offset = kWarpSize / 2; offset > 0; offset /= 2) mass += __shfl_xor_sync(0xFFFFFFFFu, mass, offset);
      const float denominator = (mass + 1.0f) - weights[i];
      h = denominator > 0.0f ? mass / denominator : 1.0f;
    }
    if (u[i - 1] < h) accepted = i;
  }
  if (lane == 0) out[0] = accepted;
}

}  // namespace

int LaunchBlockAccepted(const int64_t* tokens, const float* p, const float* q, const float* u, int64_t* out,
                        float* weights, float* workspace, int64_t rows, int64_t cols, void* stream) {
  if (rows < 2 || rows > 65537 || cols < 1) return cudaErrorInvalidValue;
  const int64_t chunks = RowChunks(cols);
  auto s = static_cast<cudaStream_t>(stream);
  if (rows > 2)
    BlockMassChunks<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows - 2)), kThreads, 0, s>>>(
        tokens, p, q, workspace, cols);
  BlockAcceptedFinish<<<1, kWarpSize, 0, s>>>(tokens, p, q, u, workspace, chunks, out, weights, rows, cols);
  return cudaGetLastError();
}

}  // namespace block_kernels
}  // namespace speclab
