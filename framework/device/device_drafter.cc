#include "framework/device/device_drafter.h"

#include "framework/drafter.h"

namespace speclab {

absl::StatusOr<ChainResult> DeviceDrafter::DraftChain(int, const ChainPick&) {
  return absl::UnimplementedError("this drafter drafts token by token");
}

absl::StatusOr<LevelsKept> DeviceDrafter::DraftLevels(int, const LevelPick&) {
  return absl::UnimplementedError("this drafter feeds tree levels from the host");
}

absl::StatusOr<ChainResult> DeviceDrafter::DraftChainAt(const DeviceRoot&, int, const ChainPick&) {
  return absl::UnimplementedError("this drafter has no device-rooted chains");
}

absl::StatusOr<LevelsKept> DeviceDrafter::DraftLevelsAt(const DeviceRoot&, int, const LevelPick&) {
  return absl::UnimplementedError("this drafter has no device-rooted tree levels");
}

absl::StatusOr<at::Tensor> DeviceDrafter::ContinuationAt(const DeviceRoot&, int) {
  return absl::UnimplementedError("this drafter has no device-rooted continuations");
}

DeviceDrafter* DeviceFormOf(Drafter& drafter) { return dynamic_cast<DeviceDrafter*>(&drafter); }

}  // namespace speclab
