// A builder that drafts one fixed TreeShape every step (`static`, `sequoia`):
// on the device where the drafter grows tree levels there (shape_levels.h;
// so the engine can pipeline its steps), else level by level with the host
// in the loop (shape_drafting.h). The same tree and law either way.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_TREE_BUILDER_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_TREE_BUILDER_H_

#include "algorithms/tree_builders/common/shape_levels.h"
#include "algorithms/tree_builders/common/tree_shape.h"
#include "framework/device/device_tree_builder.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace tree_builders {

class ShapeTreeBuilder final : public TreeBuilder, public DeviceTreeBuilder {
 public:
  // `name`: the registered builder's, for errors. `sampling`: ranks are draws
  // without replacement at temperature > 0 (top-k otherwise).
  ShapeTreeBuilder(const char* name, TreeShape shape, bool sampling)
      : name_(name), shape_(std::move(shape)), sampling_(sampling), levels_(shape_, sampling) {}

  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = true, .samples_tokens = sampling_};
  }
  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override;
  absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request, const DeviceRoot& root) override;

 private:
  const char* name_;
  TreeShape shape_;
  bool sampling_;
  ShapeLevels levels_;
};

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_TREE_BUILDER_H_
