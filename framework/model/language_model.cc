#include "framework/model/language_model.h"

#include <ATen/ATen.h>

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

std::map<int64_t, int64_t> LanguageModel::forward_counts() const {
  std::map<int64_t, int64_t> counts = forward_counts_;
  for (const auto& [tokens, count] : device_counts_) {
    const int64_t n = count.to(at::kCPU).item<int64_t>();
    if (n != 0) counts[tokens] += n;
  }
  return counts;
}

void LanguageModel::ResetForwardCounts() {
  forward_counts_.clear();
  device_counts_.clear();
}

void LanguageModel::CountForwardsOnDevice(int64_t tokens, const at::Tensor& count) {
  at::Tensor& sum = device_counts_[tokens];
  if (!sum.defined()) {
    sum = count.to(at::kLong).clone();
  } else {
    sum.add_(count);
  }
}

}  // namespace speclab
