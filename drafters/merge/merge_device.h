// The merge drafter's rule over its parts' candidates (a token-only merge's
// tree, merge_drafter.cc), in two forms: MergeInOrder on the host
// (Drafter::Continuations) and MergeOnDevice, its device form
// (DeviceDrafter::ContinuationsAt: one launch on CUDA, cuda/merge_kernel.h;
// MergeInOrder itself on the CPU).
#ifndef SPECLAB_DRAFTERS_MERGE_MERGE_DEVICE_H_
#define SPECLAB_DRAFTERS_MERGE_MERGE_DEVICE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/device/device_drafter.h"

namespace speclab::merge {

using Candidates = std::vector<std::vector<int32_t>>;

// The parts' candidates in the merge's order (`interleave`: the parts' first
// candidates, then their second, ...; else every candidate of the first
// part, then the second's, ...), the empty and repeated ones dropped, at
// most max_candidates.
Candidates MergeInOrder(const std::vector<Candidates>& each, bool interleave, int max_candidates);

// The parts' device candidates (each [max_candidates, max_tokens], on any
// device) merged as MergeInOrder merges them, on root_token's device
// (root_token: [1] int64, written past each candidate). Unimplemented on
// CUDA where the parts give more than kMaxMergedCandidates candidates in all.
absl::StatusOr<DeviceContinuations> MergeOnDevice(const std::vector<DeviceContinuations>& parts, bool interleave,
                                                  int max_candidates, const at::Tensor& root_token);

}  // namespace speclab::merge

#endif  // SPECLAB_DRAFTERS_MERGE_MERGE_DEVICE_H_
