// CUDA kernels for a few very wide float32 rows: argmax and softmax over a
// vocabulary.
//
// Decoding reduces [rows, vocab] logits and probabilities with rows = 1..16
// and vocab up to ~256k. ATen's reductions give each row one thread block,
// so a 128k-token row takes ~28 us (argmax) and ~34 us (softmax) on an H200
// while the device's other 131 SMs idle. These cut each row into chunks of
// kRowChunk elements, one block per (row, chunk), then combine the chunks'
// partial results in a second, tiny kernel: a few microseconds per call.
// Rows of up to 16k elements take one block each, in one launch.
//
// Like decode_kernels.h, this header knows nothing of torch or CUDA:
// framework/model/fused_ops.h wraps it for at::Tensor. Pointers are device
// pointers to contiguous data; `stream` is a cudaStream_t; launches are
// asynchronous, allocate nothing, never synchronise (graph-capturable) and
// return a cudaError_t (0 == cudaSuccess).
#ifndef SPECLAB_FRAMEWORK_MODEL_CUDA_ROW_KERNELS_H_
#define SPECLAB_FRAMEWORK_MODEL_CUDA_ROW_KERNELS_H_

#include <cstdint>

namespace speclab {
namespace row_kernels {

// Elements of a row that one block reduces.
constexpr int64_t kRowChunk = 2048;

// Chunks per row of `cols` elements (the workspace sizes below count them).
inline int64_t RowChunks(int64_t cols) { return (cols + kRowChunk - 1) / kRowChunk; }

// out[r] = the first index of the largest x[r][i] / max(divisor[r][i], FLT_MIN)
// (divisor == nullptr: of the largest x[r][i]). NaN counts as larger than
// every number, as in at::argmax. x, divisor [rows, cols] float32;
// out [rows] int64; workspace: rows * RowChunks(cols) uint64 values.
// 1 <= cols < 2^32.
int LaunchArgmaxRows(const float* x, const float* divisor, int64_t* out, uint64_t* workspace, int64_t rows,
                     int64_t cols, void* stream);

// The softmax of x / temperature (the division as at::div, fused):
// out[r][i] = exp(y[r][i] - M_r) / S_r with y = x / temperature, M_r the
// row's maximum of y and S_r its sum of exp(y - M_r), computed per chunk and
// merged (the fp32 sum runs in another order than ATen's: results agree with
// at::softmax to a few ulps). -inf entries give 0; a row of only -inf gives
// NaN, as at::softmax. x, out [rows, cols] float32 (out may be x);
// temperature > 0; workspace: 2 * rows * RowChunks(cols) floats.
int LaunchSoftmaxRows(const float* x, float* out, float* workspace, int64_t rows, int64_t cols, float temperature,
                      void* stream);

// The drafts chain rejection sampling accepts before its first rejection:
// the largest a <= rows - 1 with u[i] * q[i + 1][x] < p[i][x] for every
// i < a, where x = tokens[i + 1]. tokens [rows] int64; p, q [rows, cols]
// float32; u [rows - 1] float32; out [1] int64. One block.
int LaunchRejectionAccepted(const int64_t* tokens, const float* p, const float* q, const float* u, int64_t* out,
                            int64_t rows, int64_t cols, void* stream);

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

// The k largest x[r][i] of each row, best first (among equal values the
// smaller index; NaN above every number, as ArgmaxRows), and their
// log-softmax x[r][i] - M_r - log S_r (M_r the row's maximum, S_r its sum of
// exp(x - M_r), summed in another order than ATen's). x [rows, cols] float32;
// values [rows, k] float32; indices [rows, k] int64. 1 <= k <= 32, k <= cols
// < 2^32. One block per row, one launch.
int LaunchTopKLogSoftmax(const float* x, float* values, int64_t* indices, int64_t rows, int64_t cols, int k,
                         void* stream);

}  // namespace row_kernels
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_ROW_KERNELS_H_
