// The keys of device picks (ChainPick, LevelPick), derived from what a pick
// computes with: its function and its declared parameters.
//
// A model may capture a pick's work into a CUDA graph and replay it for every
// pick with the same key. So a pick is built from a function that captures
// nothing (Of() accepts only functions convertible to a plain function
// pointer) and a tuple of parameters, everything it reads besides its
// arguments; the key is the function's address and every parameter's value.
// Numbers count exactly (hex floats), tensors by identity (address, shape,
// type: a graph reads a tensor's memory, so its contents may change), picks
// by their own keys.
#ifndef SPECLAB_FRAMEWORK_DEVICE_PICK_KEY_H_
#define SPECLAB_FRAMEWORK_DEVICE_PICK_KEY_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace speclab {

inline std::string PickKeyPart(double value) { return absl::StrFormat("%a", value); }
inline std::string PickKeyPart(const std::string& value) { return absl::StrCat(value.size(), ":", value); }
inline std::string PickKeyPart(const at::Tensor& value) {
  if (!value.defined()) return "tensor()";
  return absl::StrFormat("tensor(%p, [%s], %s)", value.data_ptr(), absl::StrJoin(value.sizes(), ","),
                         std::string(c10::toString(value.scalar_type())));
}
template <typename Integer, std::enable_if_t<std::is_integral_v<Integer>, int> = 0>
std::string PickKeyPart(Integer value) {
  return absl::StrCat(value);
}
inline std::string PickKeyPart(const std::vector<int64_t>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ","), "]");
}

// "(part, part, ...)" of a parameter tuple. Picks among the parameters are
// keyed by their key() (found by argument-dependent lookup).
template <typename... Params>
std::string PickKeyParts(const std::tuple<Params...>& params) {
  std::string out = "(";
  std::apply([&out](const auto&... part) { ((out += PickKeyPart(part) + ";"), ...); }, params);
  return out + ")";
}

template <typename Pointer>
std::string PickFunctionKey(Pointer function) {
  return absl::StrFormat("fn%x", reinterpret_cast<uintptr_t>(function));
}

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_PICK_KEY_H_
