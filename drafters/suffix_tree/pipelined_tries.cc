#include "drafters/suffix_tree/pipelined_tries.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"

namespace speclab::suffix_decoding {

PipelinedTries::PipelinedTries(int max_depth, bool keep_earlier, c10::Device device, const char* drafter)
    : drafter_(drafter), keep_earlier_(keep_earlier), tries_(max_depth, keep_earlier) {
  if (device.is_cuda()) device_.emplace(max_depth, device, drafter);
}

absl::Status PipelinedTries::Reset(absl::Span<const int32_t> prompt) {
  if (device_) {
    const std::vector<int32_t> last = device_->TakeLastSequence();
    if (!last.empty()) RETURN_IF_ERROR(tries_.BeginStep(last, drafter_));
    if (keep_earlier_ && !tries_.output().empty()) device_->AddEarlier(tries_.output());
  }
  tries_.Reset(prompt);
  return absl::OkStatus();
}

absl::Status PipelinedTries::BeginStep(absl::Span<const int32_t> context) {
  if (device_) device_->Forget();  // the context holds what pipelined steps saw
  return tries_.BeginStep(context, drafter_);
}

absl::StatusOr<std::vector<int32_t>> PipelinedTries::LearnRoot(const DeviceRoot& root) {
  if (!root.context.defined())
    return absl::UnimplementedError(absl::StrCat(drafter_, ": the step handed over no context on the device"));
  std::vector<int32_t> sequence = HostSequence(root.context, root.last_two, root.position.start);
  RETURN_IF_ERROR(tries_.BeginStep(sequence, drafter_));
  return sequence;
}

}  // namespace speclab::suffix_decoding
