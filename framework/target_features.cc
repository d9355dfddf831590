#include "framework/target_features.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
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

absl::Status LastFeature::FromPrefill(const TargetFeatures& target) {
  row_ = at::Tensor();
  if (target.hidden.size() != 1)
    return absl::InvalidArgumentError(absl::StrCat(drafter_, ": expected the target's last hidden state"));
  const at::Tensor& rows = target.hidden[0];
  if (rows.size(0) > 0) row_ = rows.narrow(0, rows.size(0) - 1, 1);
  return absl::OkStatus();
}

absl::Status LastFeature::FromPath(const TargetFeatures& target, size_t path_length) {
  if (target.hidden.size() != 1 || target.hidden[0].size(0) != static_cast<int64_t>(path_length) || path_length == 0)
    return absl::InvalidArgumentError(
        absl::StrCat(drafter_, ": expected the target's last hidden state of each accepted node"));
  row_ = target.hidden[0].narrow(0, target.hidden[0].size(0) - 1, 1);
  return absl::OkStatus();
}

}  // namespace speclab
