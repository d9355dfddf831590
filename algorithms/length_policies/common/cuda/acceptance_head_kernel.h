// The acceptance head's prediction on CUDA (HeadOnDevice::Predict): the
// features of each log-probability row and the network on them, one block a
// row, in one launch, where the ATen path takes about twenty (the features,
// then the two layers) and runs inside every drafted token's step of a
// chain that the `disco` or `predicted_acceptance` stop cuts. The log_probs
// features' first layer reads [vocab, hidden] weights a row, more than a
// block a row reads quickly (3x slower than ATen's product on an H200 when
// it tried): their sums over the row's entries take a launch before, split
// over the vocabulary, and the row's block adds them up.
//
// Knows nothing of torch: acceptance_head.cc wraps it. Pointers are device
// pointers; `stream` is a cudaStream_t; the launch is asynchronous,
// allocates nothing, never synchronises and returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_CUDA_ACCEPTANCE_HEAD_KERNEL_H_
#define SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_CUDA_ACCEPTANCE_HEAD_KERNEL_H_

#include <cstdint>

namespace speclab {
namespace acceptance_head {

// The widest hidden layer the kernel holds (per thread, in registers).
constexpr int kFusedMaxHidden = 64;
// The log_probs features' split: entries of a row per block.
constexpr int kLogProbChunk = 128;

// The network's weights, float64, row-major: w1 [F, hidden], b1 [hidden],
// w2 [hidden], b2 [1].
struct HeadWeights {
  const double *w1, *b1, *w2, *b2;
  int hidden;
};

// log_probs: `rows` rows of `vocab` float32 values, row r at log_probs + r *
// row_stride. features: 0 log_probs, 1 summary or 2 summary_index
// (acceptance_head.h's Features), the index of row r being first_depth + r.
// Writes out[r] = sigmoid(w2 . silu(x_r W1 + b1) + b2), x_r the row's
// features as FeaturesOf() computes them (the same operations in float64; sums
// in another order). Requires hidden <= kFusedMaxHidden; for log_probs,
// `scratch` of LogProbScratchSize() doubles (else unused: null will do).
int LaunchPredictRows(const float* log_probs, int64_t rows, int64_t row_stride, int64_t vocab, int features,
                      double first_depth, HeadWeights weights, double* scratch, double* out, void* stream);
int64_t LogProbScratchSize(int64_t rows, int64_t vocab, int hidden);

// The hidden features (SpecDec++'s): `rows` hidden states of `width` float32
// values, row r at states + r * row_stride, as the network's input itself.
// Writes out[r] as LaunchPredictRows does. Requires hidden <= kFusedMaxHidden.
int LaunchPredictHiddenRows(const float* states, int64_t rows, int64_t row_stride, int64_t width,
                            HeadWeights weights, double* out, void* stream);

}  // namespace acceptance_head
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_LENGTH_POLICIES_COMMON_CUDA_ACCEPTANCE_HEAD_KERNEL_H_
