// One thread follows pool_rules.h; see lookahead_kernel.h.
#include "drafters/lookahead/cuda/lookahead_kernel.h"

#include <cuda_runtime.h>

namespace speclab::lookahead {
namespace {

__global__ void LearnAndBranchKernel(PoolPointers pool, const int64_t* context, const int64_t* last_two,
                                     const int64_t* start, int64_t* learned, bool learn, int max_tokens,
                                     int max_candidates, int64_t* tokens, int64_t* lengths) {
  if (learn) LearnText(pool, context, last_two, *start, learned);
  BranchFromRoot(pool, last_two[1], max_tokens, max_candidates, tokens, lengths);
}

__global__ void AdvanceWindowKernel(PoolPointers pool, int64_t* window, int levels, int width, const int64_t* guesses,
                                    const int64_t* standins, int64_t eos, bool remember) {
  AdvanceWindow(pool, window, levels, width, guesses, standins, eos, remember);
}

}  // namespace

int LaunchLearnAndBranch(PoolPointers pool, const int64_t* context, const int64_t* last_two, const int64_t* start,
                         int64_t* learned, bool learn, int max_tokens, int max_candidates, int64_t* tokens,
                         int64_t* lengths, void* stream) {
  if (pool.follower < 1 || pool.follower > kMaxFollower || pool.columns < 1 || max_tokens < 1 || max_candidates < 1)
    return cudaErrorInvalidValue;
  LearnAndBranchKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(pool, context, last_two, start, learned, learn,
                                                                       max_tokens, max_candidates, tokens, lengths);
  return cudaGetLastError();
}

int LaunchAdvanceWindow(PoolPointers pool, int64_t* window, int levels, int width, const int64_t* guesses,
                        const int64_t* standins, int64_t eos, bool remember, void* stream) {
  if (levels != pool.follower || levels > kMaxFollower || width < 1) return cudaErrorInvalidValue;
  AdvanceWindowKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(pool, window, levels, width, guesses, standins,
                                                                      eos, remember);
  return cudaGetLastError();
}

}  // namespace speclab::lookahead
