#include "framework/device/device_length_stop.h"

#include <ATen/ATen.h>

#include <atomic>
#include <cstdint>
#include <limits>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"

namespace speclab {

DeviceDraftFacts FactsOfColumns(const at::Tensor& facts, DraftRow row) {
  DeviceDraftFacts out{.draft_probability = facts.select(1, 0), .draft_entropy = facts.select(1, 1),
                       .top_probability = facts.select(1, 2)};
  const at::Tensor rows = facts.size(1) > 3 ? facts.narrow(1, 3, facts.size(1) - 3) : at::Tensor();
  if (row == DraftRow::kLogProbs) out.log_probs = rows;
  if (row == DraftRow::kHidden) out.hidden = rows;
  return out;
}

namespace {
std::string NextStopKey() {
  static std::atomic<int64_t> next{0};
  return absl::StrCat("stop#", next++);
}
}  // namespace

DeviceLengthStop::DeviceLengthStop() : key_(NextStopKey()) {}

at::Tensor DeviceLengthStop::KeptLength(const DeviceDraftFacts& facts) const { return FirstStopLength(Stops(facts)); }

double FirstFloatWhere(const std::function<bool(double)>& holds) {
  const auto value = [](uint32_t bits) { return static_cast<double>(absl::bit_cast<float>(bits)); };
  uint32_t low = 0, high = absl::bit_cast<uint32_t>(std::numeric_limits<float>::infinity());  // 0 and +inf
  if (!holds(value(high))) return std::numeric_limits<double>::quiet_NaN();
  if (holds(value(low))) return value(low);
  // Non-negative floats order as their bit patterns: holds(low) is false, holds(high) true.
  while (high - low > 1) {
    const uint32_t middle = low + (high - low) / 2;
    (holds(value(middle)) ? high : low) = middle;
  }
  return value(high);
}

at::Tensor FirstStopLength(const at::Tensor& stop) {
  // argmax of the mask gives the first true index (0 where none is true).
  const at::Tensor first = stop.to(at::kInt).argmax(0, /*keepdim=*/true).to(at::kLong) + 1;
  return at::where(stop.any().reshape({1}), first, at::full({1}, stop.size(0), first.options()));
}

}  // namespace speclab
