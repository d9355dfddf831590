// See residual_race.h.
#include "algorithms/verifiers/common/cuda/residual_race.h"

#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "framework/model/cuda/row_reduce.cuh"

namespace speclab {
namespace residual_race_kernels {
namespace {

using namespace row_reduce;  // NOLINT: the row kernels' shared reductions

// Grid (chunks): each block writes its chunk's three keys: the residual's
// race, p's race, and whether the residual has mass (1 or 0).
__global__ void ResidualRaceChunks(const float* __restrict__ p, const float* __restrict__ q,
                                   const float* __restrict__ noise, const int64_t* __restrict__ row,
                                   const float* __restrict__ weights, uint64_t* __restrict__ keys, int64_t rows,
                                   int64_t cols) {
  const int64_t r = *row, chunk = blockIdx.x;
  const float weight = weights == nullptr ? 1.0f : weights[r];
  const bool last = r == rows - 1;
  const int64_t begin = chunk * kRowChunk;
  const int64_t end = min(begin + kRowChunk, cols);
  const float* pr = p + r * cols;
  const float* qr = last ? pr : q + (r + 1) * cols;
  const float* er = noise + r * cols;
  uint64_t residual_key = 0, p_key = 0, mass = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float d = fmaxf(er[i], FLT_MIN);
    const float s = last ? pr[i] : fmaxf(__fmul_rn(weight, pr[i]) - qr[i], 0.0f);
    residual_key = MaxKey(residual_key, ArgmaxKey(s / d, static_cast<uint32_t>(i)));
    p_key = MaxKey(p_key, ArgmaxKey(pr[i] / d, static_cast<uint32_t>(i)));
    if (s > 0.0f) mass = 1;
  }
  residual_key = BlockMaxKey(residual_key);
  p_key = BlockMaxKey(p_key);
  mass = BlockMaxKey(mass);
  if (threadIdx.x == 0) {
    keys[3 * chunk] = residual_key;
    keys[3 * chunk + 1] = p_key;
    keys[3 * chunk + 2] = mass;
  }
}

__global__ void ResidualRaceMerge(const uint64_t* __restrict__ keys, int64_t* __restrict__ out, int64_t chunks) {
  uint64_t residual_key = 0, p_key = 0, mass = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    residual_key = MaxKey(residual_key, keys[3 * c]);
    p_key = MaxKey(p_key, keys[3 * c + 1]);
    mass = MaxKey(mass, keys[3 * c + 2]);
  }
  residual_key = BlockMaxKey(residual_key);
  p_key = BlockMaxKey(p_key);
  mass = BlockMaxKey(mass);
  const uint64_t key = mass ? residual_key : p_key;
  if (threadIdx.x == 0) out[0] = static_cast<int64_t>(0xFFFFFFFFu - static_cast<uint32_t>(key & 0xFFFFFFFFu));
}

}  // namespace

int LaunchResidualRace(const float* p, const float* q, const float* noise, const int64_t* row, const float* weights,
                       int64_t* out, uint64_t* workspace, int64_t rows, int64_t cols, void* stream) {
  if (rows < 1 || cols < 1 || cols >= (int64_t{1} << 32)) return cudaErrorInvalidValue;
  const int64_t chunks = RowChunks(cols);
  auto s = static_cast<cudaStream_t>(stream);
  ResidualRaceChunks<<<static_cast<unsigned>(chunks), kThreads, 0, s>>>(p, q, noise, row, weights, workspace, rows,
                                                                       cols);
  ResidualRaceMerge<<<1, kThreads, 0, s>>>(workspace, out, chunks);
  return cudaGetLastError();
}

}  // namespace residual_race_kernels
}  // namespace speclab
