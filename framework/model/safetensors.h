// Safetensors: reading and writing the HuggingFace tensor file format.
#ifndef SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_H_
#define SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace speclab {

// All tensors of one .safetensors file, on the CPU in their stored dtype
// (F32, F16, BF16, I64, I32). Errors name the file: missing, truncated,
// malformed header, unsupported dtype, offsets out of range.
absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensors(const std::string& path);

// Writes tensors (moved to the CPU, made contiguous) with sorted names.
absl::Status WriteSafetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_H_
