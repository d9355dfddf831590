#include "framework/device/device_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

#include "framework/drafter.h"

namespace speclab {

absl::StatusOr<at::Tensor> FeatureBeforeRoot(const DeviceRoot& root, const std::string& drafter) {
  if (root.target.hidden.size() != 1 || !root.path_length.defined())
    return absl::UnimplementedError(absl::StrCat(drafter, ": the pipelined step handed over no target features"));
  return root.target.hidden[0].index_select(0, root.path_length.to(at::kLong).view({1}) - 1);
}

std::vector<int32_t> HostSequence(const at::Tensor& context, const at::Tensor& last_two, const at::Tensor& start) {
  const int64_t s = start.item<int64_t>();
  const at::Tensor tokens = at::cat({context.narrow(0, 0, s), last_two.reshape({2})}).to(at::kCPU, at::kLong).contiguous();
  return std::vector<int32_t>(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + s + 2);
}

DeviceContinuations ToDeviceContinuations(const std::vector<std::vector<int32_t>>& candidates, int max_candidates,
                                          int max_tokens, int64_t fill, c10::Device device) {
  const auto longs = at::TensorOptions().dtype(at::kLong);
  at::Tensor tokens = at::full({max_candidates, max_tokens}, fill, longs);
  at::Tensor lengths = at::zeros({max_candidates}, longs);
  for (int c = 0; c < max_candidates && c < static_cast<int>(candidates.size()); ++c) {
    const int length = std::min<int>(max_tokens, static_cast<int>(candidates[c].size()));
    lengths.data_ptr<int64_t>()[c] = length;
    std::copy(candidates[c].begin(), candidates[c].begin() + length, tokens.data_ptr<int64_t>() + c * max_tokens);
  }
  return {.tokens = tokens.to(device), .lengths = lengths.to(device)};
}

absl::StatusOr<ChainResult> DeviceDrafter::DraftChain(int, const ChainPick&) {
  return absl::UnimplementedError("this drafter drafts token by token");
}

absl::StatusOr<LevelsKept> DeviceDrafter::DraftLevels(int, const LevelPick&) {
  return absl::UnimplementedError("this drafter feeds tree levels from the host");
}

absl::StatusOr<ChainResult> DeviceDrafter::DraftChainAt(const DeviceRoot&, int, const ChainPick&) {
  return absl::UnimplementedError("this drafter has no device-rooted chains");
}

absl::StatusOr<ChainResult> DeviceDrafter::DraftChainInRoundsAt(const DeviceRoot&, int, const ChainPick&,
                                                                 const ChainGuess&) {
  return absl::UnimplementedError("this drafter has no device-rooted chains in rounds");
}

absl::StatusOr<ChainGuess> DeviceDrafter::GuessOf(int) {
  return absl::UnimplementedError("this drafter's continuations are not a function of the sequence alone");
}

absl::StatusOr<LevelsKept> DeviceDrafter::DraftLevelsAt(const DeviceRoot&, int, const LevelPick&) {
  return absl::UnimplementedError("this drafter has no device-rooted tree levels");
}

absl::StatusOr<at::Tensor> DeviceDrafter::ContinuationAt(const DeviceRoot&, int) {
  return absl::UnimplementedError("this drafter has no device-rooted continuations");
}

absl::StatusOr<DeviceContinuations> DeviceDrafter::ContinuationsAt(const DeviceRoot&, int, int) {
  return absl::UnimplementedError("this drafter has no device-rooted candidate continuations");
}

absl::StatusOr<DeviceRiders> DeviceDrafter::RidersAt() { return DeviceRiders(); }

absl::Status DeviceDrafter::RidersScoredAt(const at::Tensor&) {
  return absl::InternalError("riders scored for a drafter that gave none on the device");
}

DeviceDrafter* DeviceFormOf(Drafter& drafter) { return dynamic_cast<DeviceDrafter*>(&drafter); }

DeviceGraphs* DraftGraphsOf(Drafter& drafter) {
  DeviceDrafter* device = DeviceFormOf(drafter);
  return device == nullptr ? nullptr : device->graphs();
}

}  // namespace speclab
