// The merged candidates in one block; see merge_kernel.h. A thread a
// candidate: it is kept where it is not empty and no earlier candidate
// equals it; its place among the kept is the count of kept ones before it
// (a ballot a warp, then the warps' totals).
#include "drafters/merge/cuda/merge_kernel.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace speclab {
namespace merge {
namespace {

constexpr int kThreads = kMaxMergedCandidates;
constexpr int kWarps = kThreads / 32;

__device__ bool SameCandidate(const int64_t* tokens, const int64_t* lengths, int width, int a, int b) {
  if (lengths[a] != lengths[b]) return false;
  for (int64_t t = 0; t < lengths[a]; ++t)
    if (tokens[static_cast<int64_t>(a) * width + t] != tokens[static_cast<int64_t>(b) * width + t]) return false;
  return true;
}

__global__ void __launch_bounds__(kThreads)
    MergeCandidates(const int64_t* __restrict__ in_tokens, const int64_t* __restrict__ in_lengths, int count,
                    int width, int max_candidates, const int64_t* __restrict__ root, int64_t* __restrict__ out_tokens,
                    int64_t* __restrict__ out_lengths) {
  __shared__ int warp_kept[kWarps];
  const int i = threadIdx.x, warp = i / 32, lane = i % 32;
  bool keep = i < count && in_lengths[i] > 0;
  for (int j = 0; keep && j < i; ++j) keep = !SameCandidate(in_tokens, in_lengths, width, i, j);
  const unsigned kept = __ballot_sync(0xFFFFFFFFu, keep);
  if (lane == 0) warp_kept[warp] = __popc(kept);
  for (int e = i; e < max_candidates * width; e += kThreads) out_tokens[e] = *root;
  for (int c = i; c < max_candidates; c += kThreads) out_lengths[c] = 0;
  __syncthreads();  // the fill before the kept rows
  int place = __popc(kept & ((1u << lane) - 1));
  for (int w = 0; w < warp; ++w) place += warp_kept[w];
  if (!keep || place >= max_candidates) return;
  out_lengths[place] = in_lengths[i];
  for (int64_t t = 0; t < in_lengths[i]; ++t)
    out_tokens[static_cast<int64_t>(place) * width + t] = in_tokens[static_cast<int64_t>(i) * width + t];
}

}  // namespace

int LaunchMergeCandidates(const int64_t* in_tokens, const int64_t* in_lengths, int count, int width,
                          int max_candidates, const int64_t* root, int64_t* out_tokens, int64_t* out_lengths,
                          void* stream) {
  if (count < 0 || count > kMaxMergedCandidates || width < 1 || max_candidates < 1) return cudaErrorInvalidValue;
  MergeCandidates<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(in_tokens, in_lengths, count, width,
                                                                         max_candidates, root, out_tokens,
                                                                         out_lengths);
  return cudaGetLastError();
}

}  // namespace merge
}  // namespace speclab
