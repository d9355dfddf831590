// Kangaroo's drafting model (Y. Liu et al., "Kangaroo: Lossless
// Self-Speculative Decoding via Double Early Exiting", 2024;
// docs/algorithms.md §4.16): the target's first `exit_layer` decoder layers,
// shared, then an adapter, read out through the target's final norm and LM
// head. The adapter is one Llama layer whose attention (and its input norm)
// is trained and whose MLP is held at zero: Kangaroo's adapter is one
// attention block and its norm. `speclab train` with `kangaroo_adapter:`
// fits it (experiments/train_draft_head.h); the `kangaroo` drafter drafts
// with it (a ModelDrafter: chains and levels as CUDA graphs, pipelined).
//
// A checkpoint (.safetensors) holds "exit_layer" (int64 [1]) and the
// adapter's "self_attn.{q,k,v,o}_proj.weight" and "input_layernorm.weight"
// under transformers' Llama names, prefixed "adapter.".
#ifndef SPECLAB_DRAFTERS_KANGAROO_KANGAROO_ADAPTER_H_
#define SPECLAB_DRAFTERS_KANGAROO_KANGAROO_ADAPTER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/model/llama_model.h"

namespace speclab {

// The drafting model with an untrained adapter (drawn from `seed`, its MLP
// zero) after the first `exit_layer` layers of `target` (1 to its layer
// count - 1), with a KV cache of `kv_capacity` slots.
absl::StatusOr<std::unique_ptr<LlamaModel>> NewKangarooModel(const LlamaModel& target, int64_t exit_layer,
                                                             int64_t kv_capacity, uint64_t seed);

// The adapter alone, as NewKangarooModel draws it (one new layer on the
// target's embedding, final norm and LM head, its MLP zero), for a trainer
// that feeds it the target's hidden state after `exit_layer`. The same
// errors as NewKangarooModel.
absl::StatusOr<std::unique_ptr<LlamaModel>> NewKangarooAdapter(const LlamaModel& target, int64_t exit_layer,
                                                               int64_t kv_capacity, uint64_t seed);

// Zeroes the MLP of `model`'s decoder layer `layer`, which makes the layer
// an attention block: x + attention(input_norm(x)).
void ZeroAdapterMlp(LlamaModel& model, int64_t layer);

// The adapter's trained tensors, layer `layer` of `model`, as the model
// holds them (what training updates), in the model's order.
std::vector<at::Tensor> AdapterParameters(const LlamaModel& model, int64_t layer);

// The same tensors under the checkpoint's names ("adapter." + transformers'
// names), on the CPU.
std::map<std::string, at::Tensor> AdapterTensors(const LlamaModel& model, int64_t layer);

// Writes the adapter (layer `layer` of `model`) and `exit_layer`, floats in `dtype`.
absl::Status SaveKangarooAdapter(const std::string& path, const LlamaModel& model, int64_t layer, int64_t exit_layer,
                                 at::ScalarType dtype);

// The drafting model of a checkpoint; errors name the file and the tensor
// (missing, extra, wrong shape) or the exit layer the target has not.
absl::StatusOr<std::unique_ptr<LlamaModel>> LoadKangarooModel(const std::string& path, const LlamaModel& target,
                                                              int64_t kv_capacity);

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_KANGAROO_KANGAROO_ADAPTER_H_
