// Safetensors: reading and writing the HuggingFace tensor file format.
#ifndef SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_H_
#define SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab {

// All tensors of one .safetensors file, on the CPU in their stored dtype
// (F32, F16, BF16, I64, I32). Errors name the file: missing, truncated,
// malformed header, unsupported dtype, offsets out of range.
absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensors(const std::string& path);

// A checkpoint's tensors, taken one by one by name and expected shape, for
// loaders of fixed layouts (draft heads): errors name the file, the tensor
// and both shapes, and Finish() names a tensor nothing took. `what` says
// what the file should hold ("2 heads of 1 ResBlocks"), for the messages.
class CheckpointTensors {
 public:
  static absl::StatusOr<CheckpointTensors> Read(const std::string& path, std::string what);

  bool Has(const std::string& name) const { return tensors_.count(name) > 0; }
  // The stored shape of a tensor not taken yet (NotFound naming the file), for
  // layouts whose sizes the file decides (how many layers an EAGLE-3 head fuses).
  absl::StatusOr<std::vector<int64_t>> Shape(const std::string& name) const;
  // The names not taken yet, sorted.
  std::vector<std::string> Names() const;
  // What the file should hold, once known from its names.
  void Expect(std::string what) { what_ = std::move(what); }
  // The tensor, as stored (on the CPU): NotFound, or InvalidArgument for another shape.
  absl::StatusOr<at::Tensor> Take(const std::string& name, const std::vector<int64_t>& shape);
  // Take(), converted to `options` (a model's parameter dtype and device).
  absl::StatusOr<at::Tensor> Take(const std::string& name, const std::vector<int64_t>& shape,
                                  const at::TensorOptions& options);
  // InvalidArgument naming a tensor not taken, and `hint` (what to check).
  absl::Status Finish(const std::string& hint) const;

 private:
  std::string path_, what_;
  std::map<std::string, at::Tensor> tensors_;
};

// Writes tensors (moved to the CPU, made contiguous) with sorted names.
absl::Status WriteSafetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_H_
