#include "drafters/merge/merge_device.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "drafters/merge/cuda/merge_kernel.h"
#include "framework/core/status_macros.h"
#include "framework/device/kernel_launch.h"

namespace speclab::merge {

Candidates MergeInOrder(const std::vector<Candidates>& each, bool interleave, int max_candidates) {
  Candidates merged;
  auto add = [&](const std::vector<int32_t>& candidate) {
    if (static_cast<int>(merged.size()) < max_candidates && !candidate.empty() &&
        std::find(merged.begin(), merged.end(), candidate) == merged.end())
      merged.push_back(candidate);
  };
  if (interleave) {
    for (size_t rank = 0;; ++rank) {
      bool any = false;
      for (const Candidates& candidates : each) {
        if (rank >= candidates.size()) continue;
        any = true;
        add(candidates[rank]);
      }
      if (!any) break;
    }
  } else {
    for (const Candidates& candidates : each)
      for (const auto& candidate : candidates) add(candidate);
  }
  return merged;
}

absl::StatusOr<DeviceContinuations> MergeOnDevice(const std::vector<DeviceContinuations>& parts, bool interleave,
                                                  int max_candidates, const at::Tensor& root_token) {
  if (parts.empty() || max_candidates < 1)
    return absl::InvalidArgumentError(absl::StrCat("merge: ", max_candidates, " candidates of ", parts.size(),
                                                   " parts"));
  const c10::Device device = root_token.device();
  const int64_t max_tokens = parts.front().tokens.size(1);
  std::vector<at::Tensor> tokens, lengths;
  for (const DeviceContinuations& part : parts) {  // on one device, whichever a part keeps its state on
    tokens.push_back(part.tokens.to(device, at::kLong));
    lengths.push_back(part.lengths.to(device, at::kLong));
  }
  // [parts, candidates, tokens], in the merge's order.
  at::Tensor all_tokens = at::stack(tokens), all_lengths = at::stack(lengths);
  if (interleave) {
    all_tokens = all_tokens.transpose(0, 1);
    all_lengths = all_lengths.transpose(0, 1);
  }
  all_tokens = all_tokens.reshape({-1, max_tokens}).contiguous();
  all_lengths = all_lengths.reshape({-1}).contiguous();
  const at::Tensor root = root_token.reshape({1}).to(at::kLong).contiguous();
#ifdef SPECLAB_WITH_CUDA
  if (device.is_cuda()) {
    const int count = static_cast<int>(all_lengths.size(0));
    if (count > kMaxMergedCandidates)
      return absl::UnimplementedError(absl::StrCat("merge: the device merge reads at most ", kMaxMergedCandidates,
                                                   " candidates, the parts give ", count));
    DeviceContinuations out{.tokens = at::empty({max_candidates, max_tokens}, all_tokens.options()),
                            .lengths = at::empty({max_candidates}, all_tokens.options())};
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device, "merge: merge kernel", [&](void* stream) {
      return LaunchMergeCandidates(all_tokens.data_ptr<int64_t>(), all_lengths.data_ptr<int64_t>(), count,
                                   static_cast<int>(max_tokens), max_candidates, root.data_ptr<int64_t>(),
                                   out.tokens.data_ptr<int64_t>(), out.lengths.data_ptr<int64_t>(), stream);
    }));
    return out;
  }
#endif
  if (!device.is_cpu())
    return absl::UnimplementedError(absl::StrCat("merge: no device-rooted candidates on ", device.str()));
  // The host's rule (the CPU runs tests): the rows are already in the merge's order.
  Candidates in_order;
  for (int64_t c = 0; c < all_lengths.size(0); ++c) {
    const int64_t* row = all_tokens.data_ptr<int64_t>() + c * max_tokens;
    in_order.emplace_back(row, row + all_lengths.data_ptr<int64_t>()[c]);
  }
  return ToDeviceContinuations(MergeInOrder({in_order}, false, max_candidates), max_candidates,
                               static_cast<int>(max_tokens), root.item<int64_t>(), device);
}

}  // namespace speclab::merge
