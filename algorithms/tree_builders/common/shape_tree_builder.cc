#include "algorithms/tree_builders/common/shape_tree_builder.h"

#include <optional>
#include <utility>

#include "algorithms/tree_builders/common/shape_drafting.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace tree_builders {

absl::StatusOr<DraftTree> ShapeTreeBuilder::Build(Drafter& drafter, const BuildRequest& request) {
  ASSIGN_OR_RETURN(std::optional<DraftTree> grown, levels_.Draft(drafter, request, name_));
  if (grown) return *std::move(grown);
  return DraftShape(drafter, request, shape_, sampling_, name_);
}

absl::StatusOr<DraftTree> ShapeTreeBuilder::BuildAt(Drafter& drafter, const BuildRequest& request,
                                                    const DeviceRoot& root) {
  ASSIGN_OR_RETURN(std::optional<DraftTree> grown, levels_.Draft(drafter, request, name_, &root));
  if (!grown) return absl::UnimplementedError("the drafter has no device-rooted tree levels, or the shape no level");
  return *std::move(grown);
}

}  // namespace tree_builders
}  // namespace speclab
