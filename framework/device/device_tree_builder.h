// DeviceTreeBuilder: a tree builder's device form, for pipelined decoding.
//
// A TreeBuilder (framework/tree_builder.h) builds each step's draft with the
// host in the loop. One that can also build it from a root only the device
// knows implements this interface too (chain, static, sequoia, multi_sample,
// dynamic_topk, best_first), so that the engine can queue a step before it
// has read the previous one (framework/device/pipelined_steps.h). Where it is absent the engine steps
// on the host and says so (Generation::engine_form).
#ifndef SPECLAB_FRAMEWORK_DEVICE_DEVICE_TREE_BUILDER_H_
#define SPECLAB_FRAMEWORK_DEVICE_DEVICE_TREE_BUILDER_H_

#include "absl/status/statusor.h"
#include "framework/device/device_drafter.h"
#include "framework/draft_tree.h"
#include "framework/drafter.h"
#include "framework/tree_builder.h"

namespace speclab {

class DeviceTreeBuilder {
 public:
  virtual ~DeviceTreeBuilder() = default;

  // The draft Build() would make, rooted at a token only the device knows
  // (the drafter's device form: DeviceDrafter::DraftChainAt, ContinuationAt,
  // DraftLevelsAt). Chain builders return the chain (the host tree's tokens
  // are placeholders); branching builders a tree whose shape is on the
  // device (DraftTree::device_shape). Unimplemented where this step cannot be
  // drafted so (the drafter has no device form, say): the engine then runs
  // step by step.
  virtual absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request, const DeviceRoot& root) = 0;
};

// The device form of `builder`, or null where it has none.
DeviceTreeBuilder* DeviceFormOf(TreeBuilder& builder);
const DeviceTreeBuilder* DeviceFormOf(const TreeBuilder& builder);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_TREE_BUILDER_H_
