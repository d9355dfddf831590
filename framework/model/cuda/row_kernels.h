// CUDA kernels for a few very wide float32 rows: argmax, softmax and top-k
// over a vocabulary. (The chain verifiers' own kernels, built on the same
// chunked reductions, row_reduce.cuh, live with them: algorithms/verifiers/*/cuda/.)
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

// Rows of at most kSmallRow elements take one block each (no workspace).
constexpr int64_t kSmallRow = 16384;

// The chunks the argmax and softmax workspaces below count: RowChunks(cols)
// for rows past kSmallRow; 0 for rows of one block, which read none (the
// workspace pointer may then be null).
inline int64_t WorkspaceChunks(int64_t cols) { return cols <= kSmallRow ? 0 : RowChunks(cols); }

// out[r] = the first index of the largest x[r][i] / max(divisor[r][i], FLT_MIN)
// (divisor == nullptr: of the largest x[r][i]). NaN counts as larger than
// every number, as in at::argmax. x, divisor [rows, cols] float32;
// out [rows] int64; workspace: rows * WorkspaceChunks(cols) uint64 values.
// 1 <= cols < 2^32.
int LaunchArgmaxRows(const float* x, const float* divisor, int64_t* out, uint64_t* workspace, int64_t rows,
                     int64_t cols, void* stream);

// A chain's verdict cut after its first `kept` drafts (a length policy's
// device stop): out = (min(a, k), answer[1] where a < k, else the first index
// of the largest rows[k][i] / max(noise[i], FLT_MIN) (rows[k][i] where noise
// is null)), for answer [2] int64 (a, the extra token), kept [1] int64 (k,
// clamped into [0, row_count) for the read), rows [row_count, cols] float32,
// noise [cols] float32 or null. One block.
int LaunchCutChainAnswer(const int64_t* answer, const int64_t* kept, const float* rows, int64_t row_count,
                         int64_t cols, const float* noise, int64_t* out, void* stream);

// The softmax of x / temperature (the division as at::div, fused):
// out[r][i] = exp(y[r][i] - M_r) / S_r with y = x / temperature, M_r the
// row's maximum of y and S_r its sum of exp(y - M_r), computed per chunk and
// merged (the fp32 sum runs in another order than ATen's: results agree with
// at::softmax to a few ulps). -inf entries give 0; a row of only -inf gives
// NaN, as at::softmax. x, out [rows, cols] float32 (out may be x);
// temperature > 0; workspace: 2 * rows * WorkspaceChunks(cols) floats.
int LaunchSoftmaxRows(const float* x, float* out, float* workspace, int64_t rows, int64_t cols, float temperature,
                      void* stream);

// A drafted token's facts for each row of x (the drafter's logits), with p
// its softmax: out[r] = (q[r][tokens[r]], or 1 where q is null; the entropy
// of p in nats; the largest p[i]), the entropy as log S - sum exp(x - M) (x -
// M) / S and the largest as 1 / S (M the row's maximum, S its sum of exp(x -
// M); -inf entries count as p = 0). x and q [rows, cols] float32, tokens
// [rows] int64, out [rows, 3] float32; workspace: 3 * rows *
// WorkspaceChunks(cols) floats. Rows of up to kSmallRow entries: one block a
// row, one launch; longer ones per chunk, then merged (two launches).
int LaunchDraftFactsRows(const float* x, const float* q, const int64_t* tokens, float* out, float* workspace,
                         int64_t rows, int64_t cols, void* stream);

// The k largest x[r][i] / max(divisor[r][i], FLT_MIN) of each row (of x
// alone where divisor is null), best first; among equal values the smaller
// index, NaN above every number (ArgmaxRows' order). values [rows, k]
// float32 (those quotients), indices [rows, k] int64. 1 <= k <= 32, k <=
// cols < 2^32. One block per row, one launch: the exponential race's first k
// ranks (draws without replacement) where divisor holds Exp(1) noise.
int LaunchTopKRows(const float* x, const float* divisor, float* values, int64_t* indices, int64_t rows, int64_t cols,
                   int k, void* stream);

// The top-k warp's probabilities: with y = x / temperature (the division as
// at::div), out[r][i] = exp(y - M_r) / S_r where y[r][i] is at least the
// row's k-th largest y (ties kept), else 0; M_r the row's maximum, S_r the
// kept entries' sum of exp(y - M_r). NaN counts above every number. x, out
// [rows, cols] float32 (out may not be x); 1 <= k <= cols < 2^32;
// temperature > 0. One block per row (a radix select, then the softmax), one
// launch.
int LaunchTopKSoftmaxRows(const float* x, float* out, int64_t rows, int64_t cols, int64_t k, float temperature,
                          void* stream);

// LaunchTopKSoftmaxRows over gathered rows, and draws from each: out row b
// is the warp of x's row rows[b] (x [*, cols]; rows [n] int64, null for
// rows 0..n-1), k >= cols keeping every entry; with 1 <= ranks <= 32, noise
// [n, cols] float32 (Exp(1) values) and tokens [n, ranks] int64: the first
// `ranks` places of the exponential race of out row b, the indices
// LaunchTopKRows(out, noise, ranks) gives (at one place LaunchArgmaxRows').
// ranks 0: the warp alone (noise and tokens unread). One block per output
// row, one launch.
int LaunchTopKSoftmaxRace(const float* x, const int64_t* rows, const float* noise, float* out, int64_t* tokens,
                          int64_t n, int64_t cols, int64_t k, float temperature, int ranks, void* stream);

// Chunks per row for LaunchTopKLogSoftmax: kRowChunk elements each, fewer
// (and longer) where the merge's splits * k candidates would pass 256.
inline int64_t TopKLogSoftmaxSplits(int64_t cols, int k) {
  const int64_t most = 256 / k;
  return RowChunks(cols) < most ? RowChunks(cols) : most;
}

// The k largest x[r][i] of each row, best first (among equal values the
// smaller index; NaN above every number, as ArgmaxRows), and their
// log-softmax x[r][i] - M_r - log S_r (M_r the row's maximum, S_r its sum of
// exp(x - M_r), summed in another order than ATen's). x [rows, cols] float32;
// values [rows, k] float32; indices [rows, k] int64; workspace_keys rows *
// splits * k uint64 and workspace_parts rows * splits * 2 floats, splits =
// TopKLogSoftmaxSplits(cols, k). 1 <= k <= 32, k <= cols < 2^32. A block
// per (row, chunk), then one per row merging the chunks' k best.
int LaunchTopKLogSoftmax(const float* x, float* values, int64_t* indices, uint64_t* workspace_keys,
                         float* workspace_parts, int64_t rows, int64_t cols, int k, void* stream);

}  // namespace row_kernels
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_ROW_KERNELS_H_
