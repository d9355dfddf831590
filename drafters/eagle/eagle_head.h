// EagleHead: EAGLE's draft head (Y. Li et al., "EAGLE", ICML 2024;
// docs/algorithms.md §4.12), the network the `eagle` drafter runs and
// `speclab train` fits.
//
// The head autoregresses on the target's features. At position p it reads
// the feature f_{p-1} of the token before (the target's final-norm hidden
// state, or the head's own prediction of it) and the embedding of token x_p:
//   u_p = fc([embed(x_p), f_{p-1}])              fc: [2 hidden] -> [hidden], with bias
//   f^_p = final_norm(decoder layers(u_p))        attending to u_{<p} through its own KV cache
// and f^_p, read out through the target's LM head, gives the law of x_{p+1}.
// The decoder layers are Llama layers of the target's shape (EAGLE uses one),
// and the embedding, final norm and LM head are the target's own, shared
// (LlamaModel::WithNewLayers). Unlike EAGLE-1's first layer, speclab's keeps
// its input norm, and its prediction passes through the target's final norm,
// so that it is compared with the target's feature on one scale.
//
// A checkpoint (.safetensors) holds "fc.weight" [hidden, 2 hidden],
// "fc.bias" [hidden] and "layers.{i}.{...}" under transformers' Llama names
// (self_attn.q_proj.weight, ..., post_attention_layernorm.weight).
#ifndef SPECLAB_DRAFTERS_EAGLE_EAGLE_HEAD_H_
#define SPECLAB_DRAFTERS_EAGLE_EAGLE_HEAD_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "framework/model/llama_model.h"

namespace speclab {

struct EagleHead {
  std::unique_ptr<LlamaModel> body;  // the decoder layers, on the target's embedding, norm and LM head
  at::Tensor fc_weight, fc_bias;     // [hidden, 2 hidden], [hidden]

  // u = fc([embed(tokens), features]): tokens [..., n] int64, features [..., n, hidden].
  at::Tensor Fuse(const at::Tensor& tokens, const at::Tensor& features) const;
  // The same fusion as the body's device growths make it, from the tokens'
  // embeddings (framework/device/feature_inputs.h).
  NodeInputs Inputs() const;
  // The head's own tensors under the checkpoint's names, on the CPU.
  std::map<std::string, at::Tensor> Tensors() const;
};

// A head of `layers` decoder layers, drawn at random from `seed` (fc too:
// normal, std 0.02, bias 0), with a KV cache of `kv_capacity` positions.
absl::StatusOr<EagleHead> NewEagleHead(const LlamaModel& target, int64_t layers, int64_t kv_capacity, uint64_t seed);

// Reads a checkpoint; its layer count is that of the "layers.{i}." tensors.
// Errors name the file and the tensor (missing, extra, wrong shape).
absl::StatusOr<EagleHead> LoadEagleHead(const std::string& path, const LlamaModel& target, int64_t kv_capacity);

// Writes the head's tensors in `dtype`.
absl::Status SaveEagleHead(const std::string& path, const EagleHead& head, at::ScalarType dtype);

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_EAGLE_EAGLE_HEAD_H_
