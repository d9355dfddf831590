// Drafting on features: the device form of heads fed their own predicted
// features rather than tokens (EAGLE; docs/algorithms.md §4.12).
//
// Such a head feeds each drafted node first-layer inputs made from the
// node's token and its parent's feature (the head's prediction after the
// parent). The step's root was fed by the drafter itself, with the target's
// true features; its readout and feature start the growth.
// LlamaModel::ForwardChainOnFeatures and ForwardLevelsOnFeatures grow a
// chain or a tree's levels from there on the device (on CUDA, one CUDA graph
// each), NodeInputs saying how inputs are made, as ChainPick says how tokens
// are picked.
#ifndef SPECLAB_FRAMEWORK_DEVICE_FEATURE_INPUTS_H_
#define SPECLAB_FRAMEWORK_DEVICE_FEATURE_INPUTS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "framework/device/device_model.h"
#include "framework/device/pick_key.h"

namespace speclab {

// Where a growth on features starts: the root, already fed.
struct FeatureRoot {
  at::Tensor token;      // [1] int64 on the model's device
  at::Tensor logits;     // [1, vocab] float32: the readout after the root
  at::Tensor feature;    // [1, hidden]: the prediction after the root
  int64_t position = 0;  // the root's position
};

// Where a growth on features starts when only the device knows the root
// (pipelined steps): the tokens committed since the head last fed, fed
// first as a causal chain, the root last.
struct FeaturePathAt {
  at::Tensor tokens;    // [w] int64: the path's tokens, the root at length - 1, then padding
  at::Tensor features;  // [w, hidden]: row i the feature after the token before tokens[i]
  at::Tensor length;    // [1] int64: the path's rows, 1 to w
  DevicePosition slot;  // the cache slot of row 0, and the host's bounds on it
  at::Tensor position;  // [1] int64: the position of row 0
};

// How a drafted node's first-layer inputs are made. Built with Of() from a
// function that captures nothing and its parameters (tensors it reads, such
// as EAGLE's fc weights); the key of captured graphs is derived from them
// (pick_key.h).
class NodeInputs {
 public:
  // `function(params, embedded [n, hidden], parent_features [n, hidden])`:
  // the nodes' token embeddings (the model's own embedding) and their
  // parents' features, both in the model's dtype, to inputs [n, hidden] in
  // it. Device work only, no host reads, no RNG.
  template <typename Function, typename... Params>
  static NodeInputs Of(Function function, std::tuple<Params...> params = {}) {
    using Pointer = at::Tensor (*)(const std::tuple<Params...>&, const at::Tensor&, const at::Tensor&);
    static_assert(std::is_convertible_v<Function, Pointer>,
                  "node inputs are a function of their declared parameters and arguments: it may capture nothing");
    const Pointer pointer = function;
    NodeInputs inputs;
    inputs.key_ = absl::StrCat(PickFunctionKey(pointer), PickKeyParts(params));
    inputs.function_ = [pointer, params](const at::Tensor& embedded, const at::Tensor& parent_features) {
      return pointer(params, embedded, parent_features);
    };
    return inputs;
  }

  at::Tensor operator()(const at::Tensor& embedded, const at::Tensor& parent_features) const {
    return function_(embedded, parent_features);
  }
  const std::string& key() const { return key_; }
  bool defined() const { return static_cast<bool>(function_); }

 private:
  std::string key_;
  std::function<at::Tensor(const at::Tensor& embedded, const at::Tensor& parent_features)> function_;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_FEATURE_INPUTS_H_
