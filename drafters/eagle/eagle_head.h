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
// EAGLE-3 (Li et al. 2025; docs/algorithms.md §4.14) reads, for committed
// tokens, not the final feature but a fusion of a low, a middle and a high
// layer: f_p = fuse([h^a_p, h^b_p, h^c_p]) (fuse: [hidden, 3 hidden], no
// bias), and is trained on its own predictions (the training-time test), so
// that f^ need not match any target feature; everything else is the above.
//
// A checkpoint (.safetensors) holds "fc.weight" [hidden, 2 hidden],
// "fc.bias" [hidden] and "layers.{i}.{...}" under transformers' Llama names
// (self_attn.q_proj.weight, ..., post_attention_layernorm.weight); a fusing
// head also "fuse.weight" [hidden, L hidden] and "fuse.layers" (int64 [L],
// the layers it fuses).
#ifndef SPECLAB_DRAFTERS_EAGLE_EAGLE_HEAD_H_
#define SPECLAB_DRAFTERS_EAGLE_EAGLE_HEAD_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/model/llama_model.h"

namespace speclab {

struct EagleHead {
  std::unique_ptr<LlamaModel> body;  // the decoder layers, on the target's embedding, norm and LM head
  at::Tensor fc_weight, fc_bias;     // [hidden, 2 hidden], [hidden]
  // The target's hidden states the head reads (KeepHiddenStates' indices):
  // {-1}, the final norm's output (EAGLE-1), or several layers that
  // fuse_weight [hidden, layers x hidden] fuses (EAGLE-3).
  std::vector<int> feature_layers = {-1};
  at::Tensor fuse_weight;

  bool fuses() const { return feature_layers.size() > 1; }
  // f for committed tokens from the target's `hidden` states, one tensor
  // [..., hidden] per feature layer in order: the one layer, or their fusion.
  at::Tensor TargetFeature(const std::vector<at::Tensor>& hidden) const;

  // u = fc([embed(tokens), features]): tokens [..., n] int64, features [..., n, hidden].
  at::Tensor Fuse(const at::Tensor& tokens, const at::Tensor& features) const;
  // The same fusion as the body's device growths make it, from the tokens'
  // embeddings (framework/device/feature_inputs.h).
  NodeInputs Inputs() const;
  // The head's own tensors under the checkpoint's names, on the CPU.
  std::map<std::string, at::Tensor> Tensors() const;
};

// The head drafting `steps` tokens from every position of windows at once,
// as EAGLE-3's training-time test unrolls it, with autograd. tokens [B, T]
// are the window (the drafts, teacher-forced), target_layers the target's
// hidden states of the head's feature_layers ([B, T, hidden] each). Step j
// (1-based) gives a_j [B, T - j, hidden]: a_j[:, i] is the head's prediction
// once it is fed x_{i+1} (with the target's feature of x_i) and then
// x_{i+2} .. x_{i+j} (each with its own last prediction), every entry
// attending to the committed entries up to x_{i+1} and to its own chain, as
// drafting from the root x_{i+1} does; its readout is q of x_{i+j+1}. One
// forward per step, each over every step so far.
absl::StatusOr<std::vector<at::Tensor>> UnrollHead(const EagleHead& head, const at::Tensor& tokens,
                                                   const std::vector<at::Tensor>& target_layers, int64_t steps);

// A head of `layers` decoder layers, drawn at random from `seed` (fc and
// fuse too: normal, std 0.02, bias 0), with a KV cache of `kv_capacity`
// positions, reading `feature_layers` (two or more: fused; InvalidArgument
// for an index the target has not, or one listed twice).
absl::StatusOr<EagleHead> NewEagleHead(const LlamaModel& target, int64_t layers, int64_t kv_capacity, uint64_t seed,
                                       const std::vector<int>& feature_layers = {-1});

// EAGLE-3's choice of layers for a target of `num_layers`: transformers'
// hidden states 2, num_layers / 2 and num_layers - 3 (a low, a middle and a
// high layer's output); InvalidArgument where they are not distinct
// (fewer than 7 layers: name them instead).
absl::StatusOr<std::vector<int>> Eagle3FeatureLayers(int64_t num_layers);

// Reads a checkpoint; its layer count is that of the "layers.{i}." tensors.
// Errors name the file and the tensor (missing, extra, wrong shape).
absl::StatusOr<EagleHead> LoadEagleHead(const std::string& path, const LlamaModel& target, int64_t kv_capacity);

// Writes the head's tensors in `dtype`.
absl::Status SaveEagleHead(const std::string& path, const EagleHead& head, at::ScalarType dtype);

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_EAGLE_EAGLE_HEAD_H_
