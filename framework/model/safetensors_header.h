// The JSON header of a .safetensors file, parsed and checked against the
// data region it describes. Torch-free, so that it can be fuzzed on its own
// (tests/fuzz/); framework/model/safetensors.h reads the tensors it names.
#ifndef SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_HEADER_H_
#define SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_HEADER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // one of SafetensorsDtypes()
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte range [begin, end) within the data region
  uint64_t end = 0;
};

// The dtypes speclab reads, with their element sizes in bytes.
struct SafetensorsDtype {
  const char* name;
  int bytes;
};
const std::vector<SafetensorsDtype>& SafetensorsDtypes();

// Parses `header` (strict JSON: an object of tensor entries, each exactly
// {"dtype", "shape", "data_offsets"}, plus an optional "__metadata__"),
// checking every entry against a data region of `data_size` bytes: offsets in
// range, a span that matches shape and dtype, no tensor named twice, no two
// tensors sharing bytes. Errors start with `path` and name the tensor.
absl::StatusOr<std::vector<SafetensorsEntry>> ParseSafetensorsHeader(std::string_view header, uint64_t data_size,
                                                                     const std::string& path);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_SAFETENSORS_HEADER_H_
