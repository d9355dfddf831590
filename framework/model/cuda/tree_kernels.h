// CUDA kernels for the small index work of trees on the device: a kept
// tree's ancestor mask, and the pipelined tree steps' work: the target
// forward's inputs at a device-side start, the accepted path's cache
// entries, the step's bookkeeping. ATen spells each as several launches of a
// few microseconds; these are one launch each. (dynamic_topk's selection and
// the tree rules' walk live with their plugins: algorithms/*/cuda/.)
//
// Like row_kernels.h, this header knows nothing of torch or CUDA:
// framework/model/fused_ops.h wraps it for at::Tensor. Pointers are device
// pointers to contiguous data; `stream` is a cudaStream_t; launches are
// asynchronous, allocate nothing, never synchronise (graph-capturable) and
// return a cudaError_t (0 == cudaSuccess).
#ifndef SPECLAB_FRAMEWORK_MODEL_CUDA_TREE_KERNELS_H_
#define SPECLAB_FRAMEWORK_MODEL_CUDA_TREE_KERNELS_H_

#include <cstdint>

namespace speclab {
namespace tree_kernels {

// The most entries one launch handles.
constexpr int64_t kMaxTreeItems = 1024;

// The tree given by parents [n] int64 (node 0 the root, whose entry is
// ignored; 0 <= parents[i] < i otherwise): mask [n, n] bool, row i true at
// i and at each of its ancestors, and depths [n] int64. 1 <= n <=
// kMaxTreeItems. One block.
int LaunchTreeMask(const int64_t* parents, bool* mask, int64_t* depths, int64_t n, void* stream);

// A chain in rounds after one round (fused::AdvanceRound, whose contract
// this follows): state [6 + g] int64 as there, picks [g + 1] and guesses
// [g] int64; picks j to tokens[c + p + j] and sequence[state[4] + 1 + j],
// then the state moved on, and with set_condition `condition` set to p <
// steps. One thread block of g + 1 threads; 1 <= g < kMaxTreeItems.
int LaunchAdvanceRound(const int64_t* picks, const int64_t* guesses, int64_t g, int64_t* state, int64_t* tokens,
                       int64_t* sequence, int64_t c, int64_t steps, bool later, bool set_condition,
                       unsigned long long condition, void* stream);

// The round's rows: block [g + 1, width] float32 to rows[p + j] (p =
// state[0]), before LaunchAdvanceRound moves p on.
int LaunchRoundRows(const float* block, int64_t g, int64_t width, const int64_t* state, float* rows, void* stream);

// The static inputs of a tree forward whose start only the device knows
// (start [1] int64): for each row r < bucket, write_slots[r] = start + r,
// positions[r] = start + depths[r] (start for padding rows r >= n),
// token_buffer[r] = tokens[r] (r < n only), and allowed's row r (at
// r * allowed_stride, kv_length columns) true below start and, at columns
// start + j, mask[r][j] (mask [n, n] bool; padding rows: only the root).
// 1 <= n <= bucket <= kMaxTreeItems. One block a row.
int LaunchTreeAtInputs(const int64_t* start, const int64_t* tokens, const int64_t* depths, const bool* mask, int64_t n,
                       int64_t bucket, int64_t kv_length, int64_t allowed_stride, int64_t* token_buffer,
                       int64_t* write_slots, int64_t* positions, bool* allowed, void* stream);

// Moves an accepted path's cache entries into place: for i = 0, 1, ... while
// nodes[i] > 0 (nodes [m] int64, increasing, then zeros), the rows at slot
// start + nodes[i] of every (layer, head) of k and v ([planes, slots,
// row_words] 32-bit words) are copied to slot start + 1 + i. Each thread
// owns some words of a row and walks the path in order, so overlapping
// sources and destinations are safe (nodes[i] > i + 1 for every later read).
// One block a plane of k or v.
int LaunchMovePathEntries(uint32_t* k, uint32_t* v, const int64_t* start, const int64_t* nodes, int64_t m,
                          int64_t planes, int64_t slots, int64_t row_words, void* stream);

// A drafted chain's stop after one more draft (ChainPick::ObserveStop):
// where *go, *kept += 1 and *go = !*stop; then, with set_condition, sets
// `condition` (a graph's conditional handle, CudaGraph::NewCondition) to
// *go. One thread.
int LaunchAdvanceStop(bool* go, int64_t* kept, const bool* stop, bool set_condition, unsigned long long condition,
                      void* stream);

// A pipelined chain step's bookkeeping after its verdict (answer [2]: a
// accepted, the extra token) over tokens [g + 1] (the root, then g drafts):
// context[root + i] = tokens[i] for 1 <= i <= g, then context[root + a + 1]
// = the extra token, where root = positions[1] (positions [2]: the root's
// position less one, the root's); next_positions = positions + a + 1;
// next_last_two = tokens[a], the extra token; record [g + 5] = g, tokens,
// answer, kept (kept [1], or g where kept is null). 1 <= g < kMaxTreeItems.
// One block.
int LaunchAdvanceChainRoot(const int64_t* answer, const int64_t* tokens, int64_t g, const int64_t* kept,
                           const int64_t* positions, int64_t* context, int64_t* next_positions,
                           int64_t* next_last_two, int64_t* record, void* stream);

// A pipelined tree step's bookkeeping after its walk (the answer of the tree
// walk, algorithms/verifiers/common/cuda/tree_walk.h: walk [n + 1], a
// accepted): context[root + i] = tokens[walk[i]] for
// 1 <= i <= a and context[root + a + 1] = the extra token walk[n], where root
// = positions[1] (positions [2]: the root's position less one, the root's);
// next_positions = positions + a + 1; next_last_two = the token before the
// next root, the next root; record [3n + 1] = tokens, parents, walk.
// 1 <= n <= kMaxTreeItems. One block.
int LaunchAdvanceTreeRoot(const int64_t* walk, const int64_t* tokens, const int64_t* parents, int64_t n,
                          const int64_t* positions, int64_t* context, int64_t* next_positions, int64_t* next_last_two,
                          int64_t* record, void* stream);

}  // namespace tree_kernels
}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_CUDA_TREE_KERNELS_H_
