#include "framework/model/language_model.h"

#include "absl/strings/str_cat.h"

namespace speclab {

absl::StatusOr<int> HiddenStateIndex(int layer, int64_t num_layers) {
  const int64_t index = layer < 0 ? num_layers + 1 + layer : layer;
  if (index < 0 || index > num_layers)
    return absl::InvalidArgumentError(absl::StrCat("hidden state ", layer, " of a model with ", num_layers,
                                                   " layers: expected an index in [", -num_layers - 1, ", ",
                                                   num_layers, "]"));
  return static_cast<int>(index);
}

}  // namespace speclab
