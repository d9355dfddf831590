// One block a row; see acceptance_head_kernel.h. Each thread scans a slice
// of the row (its ten largest entries, its share of the entropy); each warp
// merges its threads', and the warps' are ranked together; the first
// `hidden` threads compute the layer, thread 0 the output. The log_probs
// features' first layer over the row's own entries runs before, split over
// the vocabulary (LogProbLayerPartials): a block a slice of each row, so that
// the [vocab, hidden] weights are read by the whole device, not by one block
// a row.
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
constexpr double kFloor = -30.0;  // acceptance_head.h's kLogProbFloor

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

// Block (c, r): the first layer's sums over row r's entries c * kLogProbChunk
// .. + kLogProbChunk, each clamped below at kLogProbFloor and divided by
// -kLogProbFloor (FeaturesOf's kLogProbs), thread t < hidden summing unit t's
// into partials[(r * gridDim.x + c) * hidden + t].
__global__ void __launch_bounds__(kFusedMaxHidden)
    LogProbLayerPartials(const float* __restrict__ log_probs, int64_t row_stride, int64_t vocab,
                         HeadWeights weights, double* __restrict__ partials) {
  __shared__ double x[kLogProbChunk];
  const float* row = log_probs + blockIdx.y * row_stride;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kLogProbChunk;
  const int count = static_cast<int>(vocab - first < kLogProbChunk ? vocab - first : kLogProbChunk);
  const int t = threadIdx.x, hidden = weights.hidden;
  for (int i = t; i < count; i += blockDim.x) {
    const double l = static_cast<double>(row[first + i]);
    x[i] = (l < kFloor ? kFloor : l) / -kFloor;  // NaN stays NaN, as clamp_min keeps it
  }
  __syncthreads();
  if (t >= hidden) return;
  double sum = 0;
  const double* w = weights.w1 + first * hidden + t;
  for (int i = 0; i < count; ++i) sum += x[i] * w[static_cast<int64_t>(i) * hidden];
  partials[(static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * hidden + t] = sum;
}

// features 0 (log_probs): the summary's weights follow the row's `vocab`
// ones, and `partials` holds the layer's sums over the row (`chunks` a row,
// LogProbLayerPartials); else partials is null.
__global__ void __launch_bounds__(kThreads)
    PredictRows(const float* __restrict__ log_probs, int64_t row_stride, int64_t vocab, int features,
                double first_depth, HeadWeights weights, const double* __restrict__ partials, int chunks,
                double* __restrict__ out) {
  __shared__ float candidates[kThreads][kTopK];
  __shared__ double partial[kWarps];  // the entropy's sums
  __shared__ double top[kTopK];
  __shared__ float warp_top[kWarps][kTopK];
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

  // The row's ten largest: each warp takes its own ten, in ten rounds over
  // the heads of its threads' lists (no block barrier between rounds), then
  // the warps' are ranked together. Only the values count, so ties may go
  // either way.
  int head = 0;
  for (int k = 0; k < kTopK; ++k) {
    float value = head < kTopK ? candidates[t][head] : -INFINITY;
    int from = lane;
    for (int offset = 16; offset > 0; offset /= 2) {  // every lane ends with the warp's best
      const float other = __shfl_xor_sync(0xffffffffu, value, offset);
      const int other_from = __shfl_xor_sync(0xffffffffu, from, offset);
      if (other > value || (other == value && other_from < from)) {
        value = other;
        from = other_from;
      }
    }
    if (lane == from) ++head;
    if (lane == 0) warp_top[warp][k] = value;
  }
  __syncthreads();
  if (t < kWarps * kTopK) {  // each warp's candidate ranked among all of them
    const float* all = &warp_top[0][0];
    const float value = all[t];
    int rank = 0;
    for (int i = 0; i < kWarps * kTopK; ++i) rank += all[i] > value || (all[i] == value && i < t);
    // Past the vocabulary: zeros, as FeaturesOf() pads.
    if (rank < kTopK) top[rank] = rank < vocab ? exp(static_cast<double>(value)) : 0.0;
  }
  __syncthreads();

  // The first layer on the summary (and the index).
  double pre = 0;
  if (t < hidden) {
    double entropy = 0;
    for (int w = 0; w < kWarps; ++w) entropy -= partial[w];
    const int64_t base = features == 0 ? vocab : 0;  // the summary's first feature
    pre = weights.b1[t];
    for (int c = 0; c < chunks; ++c) pre += partials[(static_cast<int64_t>(blockIdx.x) * chunks + c) * hidden + t];
    for (int k = 0; k < kTopK; ++k) pre += top[k] * weights.w1[(base + k) * hidden + t];
    pre += entropy * weights.w1[(base + kTopK) * hidden + t];
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
                      double first_depth, HeadWeights weights, double* scratch, double* out, void* stream) {
  if (rows < 0 || vocab < 1 || weights.hidden < 1 || weights.hidden > kFusedMaxHidden || features < 0 ||
      features > 2 || (features == 0 && scratch == nullptr))
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const cudaStream_t on = static_cast<cudaStream_t>(stream);
  int chunks = 0;
  if (features == 0) {
    chunks = static_cast<int>((vocab + kLogProbChunk - 1) / kLogProbChunk);
    LogProbLayerPartials<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)), kFusedMaxHidden, 0,
                           on>>>(log_probs, row_stride, vocab, weights, scratch);
    if (const cudaError_t error = cudaGetLastError(); error != cudaSuccess) return error;
  }
  PredictRows<<<static_cast<unsigned>(rows), kThreads, 0, on>>>(log_probs, row_stride, vocab, features, first_depth,
                                                              weights, scratch, chunks, out);
  return cudaGetLastError();
}

int64_t LogProbScratchSize(int64_t rows, int64_t vocab, int hidden) {
  return rows * ((vocab + kLogProbChunk - 1) / kLogProbChunk) * hidden;
}

}  // namespace acceptance_head
}  // namespace speclab
