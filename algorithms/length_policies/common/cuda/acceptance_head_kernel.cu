// One block a row; see acceptance_head_kernel.h. Each thread scans a slice
// of the row (its ten largest entries, its share of the entropy); the block
// merges them; the first `hidden` threads compute the layer, thread 0 the
// output.
#include "algorithms/length_policies/common/cuda/acceptance_head_kernel.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace speclab {
namespace acceptance_head {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTopK = 10;  // acceptance_head.h's kSummaryTopK

__device__ double WarpSum(double v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// The network's output for one row, every thread of the block calling: units
// t < hidden (active) put silu(pre) w2[t] in units[t], then thread 0 writes
// sigmoid(b2 + their sum) to *out.
__device__ void Output(bool active, double pre, const HeadWeights& weights, double* units, double* out) {
  const int t = threadIdx.x;
  if (active) units[t] = pre / (1.0 + exp(-pre)) * weights.w2[t];
  __syncthreads();
  if (t == 0) {
    double z = weights.b2[0];
    for (int h = 0; h < weights.hidden; ++h) z += units[h];
    *out = 1.0 / (1.0 + exp(-z));
  }
}

__global__ void __launch_bounds__(kThreads)
    PredictRows(const float* __restrict__ log_probs, int64_t row_stride, int64_t vocab, int features,
                double first_depth, HeadWeights weights, double* __restrict__ out) {
  __shared__ float candidates[kThreads][kTopK];
  __shared__ double partial[kWarps];  // the entropy's sums
  __shared__ double top[kTopK];
  __shared__ float best_value[kWarps];
  __shared__ int best_thread[kWarps];
  __shared__ int winner;
  __shared__ double hidden_out[kFusedMaxHidden];
  const float* row = log_probs + blockIdx.x * row_stride;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32, hidden = weights.hidden;

  // The slice: its top ten (descending), its sum of p log p.
  float mine[kTopK];
  for (int k = 0; k < kTopK; ++k) mine[k] = -INFINITY;
  double plogp = 0;
  for (int64_t v = t; v < vocab; v += kThreads) {
    const float l = row[v];
    if (l > mine[kTopK - 1]) {
      int k = kTopK - 1;
      for (; k > 0 && mine[k - 1] < l; --k) mine[k] = mine[k - 1];
      mine[k] = l;
    }
    const double lp = static_cast<double>(l), p = exp(lp);
    if (p > 0) plogp += p * lp;
  }
  for (int k = 0; k < kTopK; ++k) candidates[t][k] = mine[k];

  // The entropy's sums, a warp's each.
  plogp = WarpSum(plogp);
  if (lane == 0) partial[warp] = plogp;
  __syncthreads();

  // The row's ten largest: ten rounds, each taking the best head of the threads' lists.
  int head = 0;
  for (int k = 0; k < kTopK; ++k) {
    float value = head < kTopK ? candidates[t][head] : -INFINITY;
    int from = t;
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xffffffffu, value, offset);
      const int other_from = __shfl_down_sync(0xffffffffu, from, offset);
      if (other > value || (other == value && other_from < from)) {
        value = other;
        from = other_from;
      }
    }
    if (lane == 0) {
      best_value[warp] = value;
      best_thread[warp] = from;
    }
    __syncthreads();
    if (t == 0) {
      int w = 0;
      for (int i = 1; i < kWarps; ++i)
        if (best_value[i] > best_value[w]) w = i;
      winner = best_thread[w];
      // Past the vocabulary: zeros, as FeaturesOf() pads.
      top[k] = k < vocab ? exp(static_cast<double>(best_value[w])) : 0.0;
    }
    __syncthreads();
    if (t == winner) ++head;
  }

  // The first layer on the summary (and the index).
  double pre = 0;
  if (t < hidden) {
    double entropy = 0;
    for (int w = 0; w < kWarps; ++w) entropy -= partial[w];
    pre = weights.b1[t];
    for (int k = 0; k < kTopK; ++k) pre += top[k] * weights.w1[k * hidden + t];
    pre += entropy * weights.w1[kTopK * hidden + t];
    if (features == 2) pre += (first_depth + blockIdx.x) * weights.w1[(kTopK + 1) * hidden + t];
  }
  Output(t < hidden, pre, weights, hidden_out, out + blockIdx.x);
}

// One block a row of hidden states: thread t < hidden computes unit t of the
// first layer (the row's entries read by every thread, the weights' row f
// read across the threads), thread 0 the output.
__global__ void __launch_bounds__(kFusedMaxHidden)
    PredictHiddenRows(const float* __restrict__ states, int64_t row_stride, int64_t width, HeadWeights weights,
                      double* __restrict__ out) {
  __shared__ double hidden_out[kFusedMaxHidden];
  const float* row = states + blockIdx.x * row_stride;
  const int t = threadIdx.x, hidden = weights.hidden;
  double pre = 0;
  if (t < hidden) {
    pre = weights.b1[t];
    for (int64_t f = 0; f < width; ++f) pre += static_cast<double>(row[f]) * weights.w1[f * hidden + t];
  }
  Output(t < hidden, pre, weights, hidden_out, out + blockIdx.x);
}

}  // namespace

int LaunchPredictHiddenRows(const float* states, int64_t rows, int64_t row_stride, int64_t width,
                            HeadWeights weights, double* out, void* stream) {
  if (rows < 0 || width < 1 || weights.hidden < 1 || weights.hidden > kFusedMaxHidden) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  PredictHiddenRows<<<static_cast<unsigned>(rows), kFusedMaxHidden, 0, static_cast<cudaStream_t>(stream)>>>(
      states, row_stride, width, weights, out);
  return cudaGetLastError();
}

int LaunchPredictRows(const float* log_probs, int64_t rows, int64_t row_stride, int64_t vocab, int features,
                      double first_depth, HeadWeights weights, double* out, void* stream) {
  if (rows < 0 || vocab < 1 || weights.hidden < 1 || weights.hidden > kFusedMaxHidden || features < 1 || features > 2)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  PredictRows<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      log_probs, row_stride, vocab, features, first_depth, weights, out);
  return cudaGetLastError();
}

}  // namespace acceptance_head
}  // namespace speclab
