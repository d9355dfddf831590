#include "drafters/suffix_tree/device_suffix_speculation.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/device/kernel_launch.h"

namespace speclab::suffix_decoding {

void DeviceSuffixSpeculation::AddEarlier(absl::Span<const int32_t> output) {
  earlier_.push_back(-1);
  earlier_.insert(earlier_.end(), output.begin(), output.end());
  earlier_on_device_ = at::Tensor();
}

const at::Tensor& DeviceSuffixSpeculation::Budgets(const SpeculationLimits& limits) {
  at::Tensor& budgets = budgets_[{limits.max_tokens, limits.max_spec_factor, limits.max_spec_offset}];
  if (!budgets.defined()) {
    std::vector<int32_t> host(max_depth_ + 1);
    for (int m = 0; m <= max_depth_; ++m) host[m] = MatchBudget(limits, m);
    budgets = at::tensor(host, at::TensorOptions().dtype(at::kInt)).to(device_);
  }
  return budgets;
}

absl::StatusOr<DeviceSuffixSpeculation::Call> DeviceSuffixSpeculation::Prepare(const DeviceRoot& root,
                                                                               const SpeculationLimits& limits) {
  if (!root.context.defined())
    return absl::UnimplementedError(absl::StrCat(drafter_, ": the step handed over no context on the device"));
  if (!device_.is_cuda())
    return absl::UnimplementedError(absl::StrCat(drafter_, ": no device form on ", device_.str()));
  if (max_depth_ > kKernelMaxDepth)
    return absl::UnimplementedError(absl::StrCat(drafter_, ": the device form counts substrings of at most ",
                                                 kKernelMaxDepth, " tokens; max_depth is ", max_depth_));
  if (limits.max_tokens > kKernelMaxTokens)
    return absl::UnimplementedError(absl::StrCat(drafter_, ": the device form drafts at most ", kKernelMaxTokens,
                                                 " tokens a step, the builder asks ", limits.max_tokens));
  const at::Tensor context = root.context.to(device_, at::kLong).contiguous();
  Call call{.context = context,
            .last_two = root.last_two.to(device_, at::kLong).contiguous(),
            .start = root.position.start.to(device_, at::kLong).contiguous(),
            .stride = std::max<int64_t>(context.size(0) + 2, static_cast<int64_t>(earlier_.size()))};
  if (!earlier_on_device_.defined() && !earlier_.empty())
    earlier_on_device_ = at::tensor(earlier_, at::TensorOptions().dtype(at::kLong)).to(device_);
#ifdef SPECLAB_WITH_CUDA
  const int64_t bytes = SpeculationWorkspaceBytes(call.stride, limits.max_tokens);
  if (!workspace_.defined() || workspace_.numel() < bytes)
    workspace_ = at::empty({bytes + bytes / 2}, at::TensorOptions().dtype(at::kByte).device(device_));
#endif
  if (!seen_.defined()) seen_ = at::zeros({3}, at::TensorOptions().dtype(at::kLong).device(device_));
  last_context_ = call.context;
  return call;
}

absl::Status DeviceSuffixSpeculation::Launch(const Call& call, const SpeculationLimits& limits,
                                             SpeculationOutput out) {
#ifdef SPECLAB_WITH_CUDA
  const bool with_earlier = earlier_on_device_.defined();
  const SuffixTexts texts{.context = call.context.data_ptr<int64_t>(),
                          .last_two = call.last_two.data_ptr<int64_t>(),
                          .start = call.start.data_ptr<int64_t>(),
                          .sequence_capacity = call.context.size(0) + 2,
                          .earlier = with_earlier ? earlier_on_device_.data_ptr<int64_t>() : nullptr,
                          .earlier_size = with_earlier ? earlier_on_device_.size(0) : 0};
  const SpeculationShape shape{.max_depth = max_depth_,
                               .budgets = Budgets(limits).data_ptr<int32_t>(),
                               .max_tokens = limits.max_tokens,
                               .max_path = limits.max_path,
                               .tree = limits.tree,
                               .min_token_prob = limits.min_token_prob};
  out.seen = seen_.data_ptr<int64_t>();
  RETURN_IF_ERROR(kernel_launch::LaunchOn(device_, "suffix speculation", [&](void* stream) {
    return LaunchSuffixSpeculation(texts, shape, out, workspace_.data_ptr(), call.stride, stream);
  }));
  return absl::OkStatus();
#else
  return absl::UnimplementedError("suffix speculation: this build has no CUDA");
#endif
}

absl::StatusOr<DeviceContinuations> DeviceSuffixSpeculation::Candidates(const DeviceRoot& root,
                                                                        const SpeculationLimits& limits,
                                                                        TextChoice choice, int max_candidates,
                                                                        int path_tokens) {
  if (max_candidates < 1 || path_tokens < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("suffix speculation: ", max_candidates, " candidates of ", path_tokens, " tokens"));
  auto call = Prepare(root, limits);
  if (!call.ok()) return call.status();
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device_);
  const int rows = choice == TextChoice::kEach ? 2 * max_candidates : max_candidates;
  DeviceContinuations out{.tokens = at::empty({rows, path_tokens}, longs), .lengths = at::empty({rows}, longs)};
  absl::Status launched = Launch(*call, limits,
                                 {.choice = choice,
                                  .candidates = out.tokens.data_ptr<int64_t>(),
                                  .lengths = out.lengths.data_ptr<int64_t>(),
                                  .max_candidates = max_candidates,
                                  .path_tokens = path_tokens});
  if (!launched.ok()) return launched;
  return out;
}

absl::StatusOr<DeviceSuffixSpeculation::Chain> DeviceSuffixSpeculation::ChainOf(const DeviceRoot& root,
                                                                                const SpeculationLimits& limits,
                                                                                TextChoice choice, int length) {
  if (length < 0) return absl::InvalidArgumentError(absl::StrCat("suffix speculation: draft length ", length));
  auto call = Prepare(root, limits);
  if (!call.ok()) return call.status();
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device_);
  Chain out{.tokens = at::empty({length + 1}, longs), .found = at::empty({1}, longs)};
  absl::Status launched = Launch(*call, limits,
                                 {.choice = choice,
                                  .chain = out.tokens.data_ptr<int64_t>(),
                                  .chain_length = length,
                                  .found = out.found.data_ptr<int64_t>()});
  if (!launched.ok()) return launched;
  return out;
}

std::vector<int32_t> DeviceSuffixSpeculation::TakeLastSequence() {
  if (!last_context_.defined()) return {};
  std::vector<int32_t> sequence = HostSequence(last_context_, seen_.narrow(0, 0, 2), seen_.narrow(0, 2, 1));
  last_context_ = at::Tensor();
  return sequence;
}

}  // namespace speclab::suffix_decoding
