// DeviceRiders: a drafter's riders (framework/drafter.h: RiderTokens) on the
// device, for pipelined steps (DeviceDrafter::RidersAt): lookahead decoding's
// Jacobi window, whose tokens only the device knows once steps are queued
// ahead of the host. The layout (offsets, sees) is fixed for a generation;
// the tokens move each step.
#ifndef SPECLAB_FRAMEWORK_DEVICE_DEVICE_RIDERS_H_
#define SPECLAB_FRAMEWORK_DEVICE_DEVICE_RIDERS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace speclab {

class Drafter;
struct RiderTokens;

struct DeviceRiders {
  at::Tensor tokens;   // [r] int64 on the device (undefined: no riders)
  at::Tensor offsets;  // [r] int64: each rider's position minus the root's, >= 1
  at::Tensor sees;     // [r, r] bool: rider i attends to rider j (itself included)

  int64_t size() const { return tokens.defined() ? tokens.size(0) : 0; }
};

// RiderParts' device twin (framework/drafter.h), for drafters that hold
// others and draft on the device (merge): each part's RidersAt in turn,
// seeing only their own (GatherDeviceRiders), and each part's logits back.
class DeviceRiderParts {
 public:
  // Every part needs a device form (DeviceFormOf): an Internal error names
  // the first without one.
  absl::StatusOr<DeviceRiders> Gather(absl::Span<Drafter* const> parts);
  // `logits` as RidersScoredAt() got them, for the last Gather().
  absl::Status Scatter(absl::Span<Drafter* const> parts, const at::Tensor& logits);

 private:
  std::vector<int64_t> sizes_;  // each part's count in the last Gather()
};

// `riders`' layout on `device` with `tokens` ([r] int64 there) as its tokens.
DeviceRiders ToDeviceRiders(const RiderTokens& riders, const at::Tensor& tokens);

// Several drafters' riders in one forward (merge's parts): each part's in
// turn, seeing only their own. sizes: each part's count, for SplitRiderLogits.
DeviceRiders GatherDeviceRiders(absl::Span<const DeviceRiders> parts);
// The rows of `logits` ([sum of sizes, vocab]) that belong to each part.
std::vector<at::Tensor> SplitRiderLogits(const at::Tensor& logits, absl::Span<const int64_t> sizes);

// The inputs of a forward of a tree (tokens [n], depths [n], mask [n, n]
// bool, DraftTree::DeviceShape's) with `riders` after its nodes: rider i at
// depth offsets[i], seeing the root and the riders its row of sees marks;
// no node sees a rider. Fails on shapes that disagree.
struct TreeWithRiders {
  at::Tensor tokens, depths, mask;
};
absl::StatusOr<TreeWithRiders> AppendRiders(const at::Tensor& tokens, const at::Tensor& depths, const at::Tensor& mask,
                                            const DeviceRiders& riders);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_RIDERS_H_
