// Candidate selection and ancestor masks for device-grown trees; see tree_kernels.h.
#include "framework/model/cuda/tree_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace speclab {
namespace tree_kernels {
namespace {

constexpr int kThreads = static_cast<int>(kMaxTreeItems);

// Thread i writes row i: false, then true at i and up its parent chain.
__global__ void __launch_bounds__(kThreads) TreeMask(const int64_t* __restrict__ parents, bool* __restrict__ mask,
                                                    int64_t* __restrict__ depths, int n) {
  const int i = threadIdx.x;
  if (i >= n) return;
  bool* row = mask + static_cast<int64_t>(i) * n;
  for (int c = 0; c < n; ++c) row[c] = false;
  int64_t depth = 0;
  int64_t node = i;
  row[node] = true;
  // parents[node] < node bounds the walk; a malformed entry stops it.
  while (node > 0) {
    const int64_t parent = parents[node];
    if (parent < 0 || parent >= node) break;
    node = parent;
    row[node] = true;
    ++depth;
  }
  depths[i] = depth;
}

__global__ void TreeAtInputs(const int64_t* __restrict__ start, const int64_t* __restrict__ tokens,
                             const int64_t* __restrict__ depths, const bool* __restrict__ mask, int n, int kv_length,
                             int64_t allowed_stride, int64_t* __restrict__ token_buffer,
                             int64_t* __restrict__ write_slots, int64_t* __restrict__ positions,
                             bool* __restrict__ allowed) {
  const int r = blockIdx.x;
  const int64_t s = *start;
  if (threadIdx.x == 0) {
    write_slots[r] = s + r;
    positions[r] = s + (r < n ? depths[r] : 0);
    if (r < n) token_buffer[r] = tokens[r];
  }
  bool* row = allowed + r * allowed_stride;
  for (int c = threadIdx.x; c < kv_length; c += blockDim.x) {
    const int64_t j = c - s;
    row[c] = j < 0 || (r < n ? j < n && mask[static_cast<int64_t>(r) * n + j] : j == 0);
  }
}

__global__ void MovePathEntries(uint32_t* __restrict__ k, uint32_t* __restrict__ v, const int64_t* __restrict__ start,
                                const int64_t* __restrict__ nodes, int m, int64_t slots, int64_t row_words) {
  uint32_t* plane = (blockIdx.y == 0 ? k : v) + static_cast<int64_t>(blockIdx.x) * slots * row_words;
  const int64_t s = *start;
  for (int i = 0; i < m; ++i) {
    const int64_t node = nodes[i];
    if (node <= 0) break;
    const uint32_t* from = plane + (s + node) * row_words;
    uint32_t* to = plane + (s + 1 + i) * row_words;
    for (int64_t w = threadIdx.x; w < row_words; w += blockDim.x) to[w] = from[w];
  }
}

__global__ void AdvanceTreeRoot(const int64_t* __restrict__ walk, const int64_t* __restrict__ tokens,
                                const int64_t* __restrict__ parents, int n, const int64_t* __restrict__ positions,
                                int64_t* __restrict__ context, int64_t* __restrict__ next_positions,
                                int64_t* __restrict__ next_last_two, int64_t* __restrict__ record) {
  for (int i = threadIdx.x; i < 3 * n + 1; i += blockDim.x)
    record[i] = i < n ? tokens[i] : i < 2 * n ? parents[i - n] : walk[i - 2 * n];
  if (threadIdx.x != 0) return;
  const int64_t accepted = walk[0], root = positions[1];
  for (int64_t i = 1; i <= accepted; ++i) context[root + i] = tokens[walk[i]];
  context[root + accepted + 1] = walk[n];
  next_positions[0] = root + accepted;
  next_positions[1] = root + accepted + 1;
  next_last_two[0] = tokens[accepted > 0 ? walk[accepted] : 0];
  next_last_two[1] = walk[n];
}

__global__ void AdvanceChainRoot(const int64_t* __restrict__ answer, const int64_t* __restrict__ tokens, int g,
                                 const int64_t* __restrict__ kept, const int64_t* __restrict__ positions,
                                 int64_t* __restrict__ context, int64_t* __restrict__ next_positions,
                                 int64_t* __restrict__ next_last_two, int64_t* __restrict__ record) {
  const int64_t root = positions[1], accepted = answer[0];
  for (int i = threadIdx.x; i < g + 5; i += blockDim.x) {
    record[i] = i == 0 ? g : i <= g + 1 ? tokens[i - 1] : i <= g + 3 ? answer[i - g - 2] : kept ? *kept : g;
    if (i >= 1 && i <= g && i != accepted + 1) context[root + i] = tokens[i];
  }
  if (threadIdx.x != 0) return;
  context[root + accepted + 1] = answer[1];
  next_positions[0] = root + accepted;
  next_positions[1] = root + accepted + 1;
  next_last_two[0] = tokens[accepted];
  next_last_two[1] = answer[1];
}

__global__ void AdvanceStop(bool* go, int64_t* kept, const bool* stop, bool set_condition,
                            unsigned long long condition) {
  if (*go) {
    *kept += 1;
    *go = !*stop;
  }
#if CUDART_VERSION >= 12040
  if (set_condition) cudaGraphSetConditional(condition, *go ? 1u : 0u);
#endif
}

// Thread j writes pick j; thread 0 then moves the state on.
__global__ void AdvanceRound(const int64_t* __restrict__ picks, const int64_t* __restrict__ guesses, int g,
                             int64_t* state, int64_t* __restrict__ tokens, int64_t* __restrict__ sequence, int64_t c,
                             int64_t steps, bool later, bool set_condition, unsigned long long condition) {
  const int64_t p = state[0], root = state[4];
  const int j = threadIdx.x;
  if (j <= g) {
    tokens[c + p + j] = picks[j];
    sequence[root + 1 + j] = picks[j];
  }
  __syncthreads();  // every thread has read state before thread 0 writes it
  if (j != 0) return;
  int64_t matched = 0;
  while (matched < g && picks[matched] == guesses[matched]) ++matched;
  const int64_t kept = p < steps ? min(matched + 1, steps - p) : 0;
  if (later && p < steps) state[1] += 1;
  const int64_t q = p + kept;
  state[0] = q;
  if (kept > 0) state[2] = picks[kept - 1];
  state[3] = c - 1 + q;
  state[4] = root + kept;
  for (int i = 0; i <= g; ++i) state[5 + i] = min(q + i, steps - 1);
#if CUDART_VERSION >= 12040
  if (set_condition) cudaGraphSetConditional(condition, q < steps ? 1u : 0u);
#endif
}

__global__ void RoundRows(const float* __restrict__ block, int64_t count, const int64_t* __restrict__ state,
                          float* __restrict__ rows, int64_t width) {
  float* to = rows + state[0] * width;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    to[i] = block[i];
}

}  // namespace

int LaunchAdvanceRound(const int64_t* picks, const int64_t* guesses, int64_t g, int64_t* state, int64_t* tokens,
                       int64_t* sequence, int64_t c, int64_t steps, bool later, bool set_condition,
                       unsigned long long condition, void* stream) {
  if (g < 1 || g >= kMaxTreeItems || c < 1 || steps < 1) return cudaErrorInvalidValue;
  AdvanceRound<<<1, static_cast<unsigned>(g + 1), 0, static_cast<cudaStream_t>(stream)>>>(
      picks, guesses, static_cast<int>(g), state, tokens, sequence, c, steps, later, set_condition, condition);
  return cudaGetLastError();
}

int LaunchRoundRows(const float* block, int64_t g, int64_t width, const int64_t* state, float* rows, void* stream) {
  if (g < 1 || width < 1) return cudaErrorInvalidValue;
  const int64_t count = (g + 1) * width;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, 1024));
  RoundRows<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(block, count, state, rows, width);
  return cudaGetLastError();
}

int LaunchTreeAtInputs(const int64_t* start, const int64_t* tokens, const int64_t* depths, const bool* mask, int64_t n,
                       int64_t bucket, int64_t kv_length, int64_t allowed_stride, int64_t* token_buffer,
                       int64_t* write_slots, int64_t* positions, bool* allowed, void* stream) {
  if (n < 1 || n > bucket || bucket > kMaxTreeItems || kv_length < 1 || allowed_stride < kv_length)
    return cudaErrorInvalidValue;
  TreeAtInputs<<<static_cast<unsigned>(bucket), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      start, tokens, depths, mask, static_cast<int>(n), static_cast<int>(kv_length), allowed_stride, token_buffer,
      write_slots, positions, allowed);
  return cudaGetLastError();
}

int LaunchMovePathEntries(uint32_t* k, uint32_t* v, const int64_t* start, const int64_t* nodes, int64_t m,
                          int64_t planes, int64_t slots, int64_t row_words, void* stream) {
  if (m < 1 || m > kMaxTreeItems || planes < 1 || planes > 65535 || slots < 1 || row_words < 1)
    return cudaErrorInvalidValue;
  const int threads = row_words >= 128 ? 128 : static_cast<int>(row_words);
  MovePathEntries<<<dim3(static_cast<unsigned>(planes), 2), threads, 0, static_cast<cudaStream_t>(stream)>>>(
      k, v, start, nodes, static_cast<int>(m), slots, row_words);
  return cudaGetLastError();
}

int LaunchAdvanceTreeRoot(const int64_t* walk, const int64_t* tokens, const int64_t* parents, int64_t n,
                          const int64_t* positions, int64_t* context, int64_t* next_positions, int64_t* next_last_two,
                          int64_t* record, void* stream) {
  if (n < 1 || n > kMaxTreeItems) return cudaErrorInvalidValue;
  AdvanceTreeRoot<<<1, 128, 0, static_cast<cudaStream_t>(stream)>>>(walk, tokens, parents, static_cast<int>(n),
                                                                    positions, context, next_positions, next_last_two,
                                                                    record);
  return cudaGetLastError();
}

int LaunchAdvanceChainRoot(const int64_t* answer, const int64_t* tokens, int64_t g, const int64_t* kept,
                           const int64_t* positions, int64_t* context, int64_t* next_positions,
                           int64_t* next_last_two, int64_t* record, void* stream) {
  if (g < 1 || g >= kMaxTreeItems) return cudaErrorInvalidValue;
  AdvanceChainRoot<<<1, 128, 0, static_cast<cudaStream_t>(stream)>>>(answer, tokens, static_cast<int>(g), kept,
                                                                     positions, context, next_positions,
                                                                     next_last_two, record);
  return cudaGetLastError();
}

int LaunchAdvanceStop(bool* go, int64_t* kept, const bool* stop, bool set_condition, unsigned long long condition,
                      void* stream) {
  AdvanceStop<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(go, kept, stop, set_condition, condition);
  return cudaGetLastError();
}

int LaunchTreeMask(const int64_t* parents, bool* mask, int64_t* depths, int64_t n, void* stream) {
  if (n < 1 || n > kMaxTreeItems) return cudaErrorInvalidValue;
  TreeMask<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(parents, mask, depths, static_cast<int>(n));
  return cudaGetLastError();
}

}  // namespace tree_kernels
}  // namespace speclab
