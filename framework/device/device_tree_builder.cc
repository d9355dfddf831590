#include "framework/device/device_tree_builder.h"

namespace speclab {

DeviceTreeBuilder* DeviceFormOf(TreeBuilder& builder) { return dynamic_cast<DeviceTreeBuilder*>(&builder); }

const DeviceTreeBuilder* DeviceFormOf(const TreeBuilder& builder) {
  return dynamic_cast<const DeviceTreeBuilder*>(&builder);
}

}  // namespace speclab
