#include "framework/device/device_riders.h"

#include <ATen/ATen.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_drafter.h"
#include "framework/drafter.h"

namespace speclab {

absl::StatusOr<DeviceRiders> DeviceRiderParts::Gather(absl::Span<Drafter* const> parts) {
  std::vector<DeviceRiders> each;
  sizes_.clear();
  for (size_t i = 0; i < parts.size(); ++i) {
    DeviceDrafter* device = DeviceFormOf(*parts[i]);
    if (device == nullptr)
      return absl::InternalError(absl::StrCat("riders asked of part ", i, ", which has no device form"));
    ASSIGN_OR_RETURN(DeviceRiders riders, device->RidersAt());
    sizes_.push_back(riders.size());
    each.push_back(std::move(riders));
  }
  return GatherDeviceRiders(each);
}

absl::Status DeviceRiderParts::Scatter(absl::Span<Drafter* const> parts, const at::Tensor& logits) {
  if (parts.size() != sizes_.size())
    return absl::InternalError(absl::StrCat("riders of ", sizes_.size(), " drafters scattered to ", parts.size()));
  const std::vector<at::Tensor> rows = SplitRiderLogits(logits, sizes_);
  for (size_t i = 0; i < parts.size(); ++i)
    if (sizes_[i] > 0) RETURN_IF_ERROR(DeviceFormOf(*parts[i])->RidersScoredAt(rows[i]));
  return absl::OkStatus();
}

DeviceRiders ToDeviceRiders(const RiderTokens& riders, const at::Tensor& tokens) {
  const int64_t r = riders.size();
  const auto on = tokens.options();
  at::Tensor offsets = at::empty({r}, at::kLong), sees = at::empty({r, r}, at::kBool);
  std::copy(riders.offsets.begin(), riders.offsets.end(), offsets.data_ptr<int64_t>());
  bool* s = sees.data_ptr<bool>();
  for (size_t i = 0; i < riders.sees.size(); ++i) s[i] = riders.sees[i] != 0;
  return {.tokens = tokens, .offsets = offsets.to(on.device()), .sees = sees.to(on.device())};
}

DeviceRiders GatherDeviceRiders(absl::Span<const DeviceRiders> parts) {
  std::vector<at::Tensor> tokens, offsets, sees;
  for (const DeviceRiders& part : parts) {
    if (part.size() == 0) continue;
    tokens.push_back(part.tokens);
    offsets.push_back(part.offsets);
    sees.push_back(part.sees);
  }
  if (tokens.empty()) return {};
  if (tokens.size() == 1) return {.tokens = tokens[0], .offsets = offsets[0], .sees = sees[0]};
  return {.tokens = at::cat(tokens), .offsets = at::cat(offsets), .sees = at::block_diag(sees)};
}

std::vector<at::Tensor> SplitRiderLogits(const at::Tensor& logits, absl::Span<const int64_t> sizes) {
  std::vector<at::Tensor> rows;
  int64_t at = 0;
  for (int64_t size : sizes) {
    rows.push_back(logits.narrow(0, at, size));
    at += size;
  }
  return rows;
}

absl::StatusOr<TreeWithRiders> AppendRiders(const at::Tensor& tokens, const at::Tensor& depths, const at::Tensor& mask,
                                            const DeviceRiders& riders) {
  const int64_t n = tokens.size(0), r = riders.size();
  if (r == 0) return TreeWithRiders{tokens, depths, mask};
  if (riders.offsets.dim() != 1 || riders.offsets.size(0) != r || riders.sees.dim() != 2 ||
      riders.sees.size(0) != r || riders.sees.size(1) != r || mask.dim() != 2 || mask.size(0) != n ||
      mask.size(1) != n || depths.dim() != 1 || depths.size(0) != n)
    return absl::InternalError(absl::StrCat("riders: ", r, " riders' offsets or sees, or a tree of ", n,
                                            " nodes' depths or mask, are misshapen"));
  const auto flags = mask.options().dtype(at::kBool);
  at::Tensor all = at::zeros({n + r, n + r}, flags);
  all.narrow(0, 0, n).narrow(1, 0, n).copy_(mask);
  all.narrow(0, n, r).narrow(1, 0, 1).fill_(true);  // every rider sees the root
  all.narrow(0, n, r).narrow(1, n, r).copy_(riders.sees);
  return TreeWithRiders{.tokens = at::cat({tokens, riders.tokens.to(tokens.scalar_type())}),
                        .depths = at::cat({depths.to(at::kLong), riders.offsets}),
                        .mask = all};
}

}  // namespace speclab
