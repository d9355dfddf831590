#include "framework/drafter.h"

namespace speclab {

absl::StatusOr<at::Tensor> Drafter::NextTokenLogits(const TokenTree&, absl::Span<const int>,
                                                    const at::Tensor&) {
  return absl::FailedPreconditionError("this drafter gives tokens only, not next-token logits");
}

absl::StatusOr<ChainResult> Drafter::DraftChain(int, const ChainPick&) {
  return absl::UnimplementedError("this drafter drafts token by token");
}

absl::StatusOr<LevelsKept> Drafter::DraftLevels(int, const LevelPick&) {
  return absl::UnimplementedError("this drafter feeds tree levels from the host");
}

absl::StatusOr<ChainResult> Drafter::DraftChainAt(const DeviceRoot&, int, const ChainPick&) {
  return absl::UnimplementedError("this drafter has no device-rooted chains");
}

absl::StatusOr<LevelsKept> Drafter::DraftLevelsAt(const DeviceRoot&, int, const LevelPick&) {
  return absl::UnimplementedError("this drafter has no device-rooted tree levels");
}

absl::StatusOr<std::vector<int32_t>> Drafter::Continuation(const TokenTree&, int, int) {
  return absl::FailedPreconditionError("this drafter gives next-token logits, not token continuations");
}

absl::StatusOr<at::Tensor> Drafter::ContinuationAt(const DeviceRoot&, int) {
  return absl::UnimplementedError("this drafter has no device-rooted continuations");
}

}  // namespace speclab
