#include "framework/target_features.h"

#include <ATen/ATen.h>

#include "framework/core/status_macros.h"

namespace speclab {

absl::StatusOr<TargetFeatures> GatherFeatures(const LanguageModel& target, const TargetFeatureRequest& request,
                                              const at::Tensor& rows) {
  TargetFeatures features;
  for (int layer : request.hidden_layers) {
    ASSIGN_OR_RETURN(at::Tensor states, target.HiddenStates(layer));
    features.hidden.push_back(rows.defined() ? states.index_select(0, rows) : states.clone());
  }
  return features;
}

}  // namespace speclab
