#include "experiments/model_loading.h"

#include <ATen/Context.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace speclab {

absl::StatusOr<c10::Device> ParseDevice(const std::string& name) {
  if (name == "auto") return at::hasCUDA() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (name == "cpu") return c10::Device(c10::kCPU);
  int index = 0;
  if (name == "cuda" || (absl::StartsWith(name, "cuda:") && absl::SimpleAtoi(name.substr(5), &index))) {
    if (!at::hasCUDA()) return absl::FailedPreconditionError(absl::StrCat("device '", name, "': this build or machine has no CUDA"));
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", name, "' (expected auto, cpu, cuda or cuda:N)"));
}

absl::StatusOr<at::ScalarType> ParseDtype(const std::string& name, c10::Device device) {
  if (name == "auto") return device.is_cuda() ? at::kBFloat16 : at::kFloat;
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "' (expected auto, float32, bfloat16 or float16)"));
}

}  // namespace speclab
