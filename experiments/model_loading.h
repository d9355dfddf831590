// Device and dtype names of configs, and loading of the target model.
#ifndef SPECLAB_EXPERIMENTS_MODEL_LOADING_H_
#define SPECLAB_EXPERIMENTS_MODEL_LOADING_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "absl/status/statusor.h"

namespace speclab {

// "auto" (CUDA when present), "cpu", "cuda", "cuda:N".
absl::StatusOr<c10::Device> ParseDevice(const std::string& name);
// "auto" (bfloat16 on CUDA, float32 on CPU), "float32", "bfloat16", "float16".
absl::StatusOr<at::ScalarType> ParseDtype(const std::string& name, c10::Device device);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_MODEL_LOADING_H_
