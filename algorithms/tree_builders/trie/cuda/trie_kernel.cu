// The trie in one block; see trie_kernel.h and trie_device.h.
#include "algorithms/tree_builders/trie/cuda/trie_kernel.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace speclab {
namespace tree_builders {
namespace {

constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads)
    TrieFromCandidates(const int64_t* __restrict__ tokens, const int64_t* __restrict__ lengths,
                       const int64_t* __restrict__ root, int k, int length, int budget,
                       int64_t* __restrict__ out_tokens, int64_t* __restrict__ parents, int64_t* __restrict__ depths,
                       bool* __restrict__ mask, int64_t* __restrict__ drafted) {
  __shared__ int32_t token[kMaxTrieEntries];     // candidate c's token i at c * length + i (the root past its end)
  __shared__ int16_t valid_length[kMaxTrieEntries];
  // The first candidate sharing c's first i + 1 tokens (-1: past c's end).
  __shared__ int16_t earliest[kMaxTrieEntries];
  __shared__ int16_t place[kMaxTrieEntries];     // the entry's node in the tree
  __shared__ int live_count;
  __shared__ int32_t fill_token;                 // node 1's token, which the nodes past the host's trie copy
  const int total = k * length;
  const int n = 1 + (budget < total ? budget : total);
  const int64_t root_token = *root;
  for (int c = threadIdx.x; c < k; c += kThreads) {
    const int64_t l = lengths[c];
    valid_length[c] = static_cast<int16_t>(l < 0 ? 0 : l > length ? length : l);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < total; e += kThreads)
    token[e] = static_cast<int32_t>(e % length < valid_length[e / length] ? tokens[e] : root_token);
  __syncthreads();
  for (int e = threadIdx.x; e < total; e += kThreads) {
    const int c = e / length, i = e % length;
    int first = -1;
    if (i < valid_length[c]) {
      for (int a = 0; a <= c && first < 0; ++a) {
        if (valid_length[a] <= i) continue;
        bool same = true;
        for (int t = 0; t <= i && same; ++t) same = token[a * length + t] == token[c * length + t];
        if (same) first = a;
      }
    }
    earliest[e] = static_cast<int16_t>(first);
  }
  __syncthreads();
  // The host's insertion order: (c, i); a prefix's first entry is a node
  // while the budget lasts, every other entry is filled in after them.
  if (threadIdx.x == 0) {
    int live = 0, first_live = -1;
    for (int e = 0; e < total; ++e) {
      const bool fresh = earliest[e] == e / length && live < budget;
      place[e] = static_cast<int16_t>(fresh ? ++live : 0);
      if (fresh && first_live < 0) first_live = e;
    }
    int dead = live;
    for (int e = 0; e < total; ++e)
      if (place[e] == 0) place[e] = static_cast<int16_t>(++dead);
    live_count = live;
    *drafted = live > 0 ? live : 1;  // node 1 is verified even as a copy of the root's token
    fill_token = token[first_live >= 0 ? first_live : 0];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    out_tokens[0] = root_token;
    parents[0] = -1;
    depths[0] = 0;
  }
  for (int e = threadIdx.x; e < total; e += kThreads) {
    const int p = place[e];
    if (p >= n) continue;
    const int i = e % length;
    const bool live = p <= live_count;
    out_tokens[p] = live ? token[e] : fill_token;
    parents[p] = live && i > 0 ? place[earliest[e - 1] * length + i - 1] : 0;  // the node of its first i tokens
    depths[p] = live ? i + 1 : 1;
  }
  __syncthreads();
  for (int row = threadIdx.x; row < n; row += kThreads) {
    bool* out = mask + static_cast<int64_t>(row) * n;
    for (int col = 0; col < n; ++col) out[col] = false;
    for (int64_t a = row; a >= 0; a = parents[a]) out[a] = true;
  }
}

}  // namespace

int LaunchTrieFromCandidates(const int64_t* tokens, const int64_t* lengths, const int64_t* root, int k, int length,
                             int budget, int64_t* out_tokens, int64_t* parents, int64_t* depths, bool* mask,
                             int64_t* drafted,
                             void* stream) {
  if (k < 1 || length < 1 || k * length > kMaxTrieEntries || budget < 1) return cudaErrorInvalidValue;
  TrieFromCandidates<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(tokens, lengths, root, k, length, budget,
                                                                            out_tokens, parents, depths, mask, drafted);
  return cudaGetLastError();
}

}  // namespace tree_builders
}  // namespace speclab
