#include "drafters/kangaroo/kangaroo_adapter.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/model/safetensors.h"

namespace speclab {
namespace {

constexpr char kFilePrefix[] = "adapter.";
// What of a Llama layer the adapter trains and keeps.
constexpr const char* kAdapterParts[] = {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                         "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                         "input_layernorm.weight"};

std::string LayerPrefix(int64_t layer) { return absl::StrCat("model.layers.", layer, "."); }

// The adapter's part of layer `layer` that `name` is, or null.
const char* AdapterPart(const std::string& name, int64_t layer) {
  const std::string prefix = LayerPrefix(layer);
  for (const char* part : kAdapterParts)
    if (name == prefix + part) return part;
  return nullptr;
}

absl::Status CheckExitLayer(const LlamaModel& target, int64_t exit_layer) {
  const int64_t layers = target.config().num_hidden_layers;
  if (exit_layer < 1 || exit_layer >= layers)
    return absl::InvalidArgumentError(absl::StrCat("exit layer ", exit_layer, " is outside [1, ", layers - 1,
                                                   "] (the target has ", layers, " layers)"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> NewKangarooModel(const LlamaModel& target, int64_t exit_layer,
                                                             int64_t kv_capacity, uint64_t seed) {
  RETURN_IF_ERROR(CheckExitLayer(target, exit_layer));
  std::vector<int> shallow;
  for (int i = 0; i < exit_layer; ++i) shallow.push_back(i);
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model,
                   LlamaModel::ShareLayersThenNew(target, shallow, /*added=*/1, kv_capacity, seed));
  ZeroAdapterMlp(*model, exit_layer);
  return model;
}

absl::StatusOr<std::unique_ptr<LlamaModel>> NewKangarooAdapter(const LlamaModel& target, int64_t exit_layer,
                                                               int64_t kv_capacity, uint64_t seed) {
  RETURN_IF_ERROR(CheckExitLayer(target, exit_layer));
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> adapter, LlamaModel::WithNewLayers(target, 1, kv_capacity, seed));
  ZeroAdapterMlp(*adapter, 0);
  return adapter;
}

void ZeroAdapterMlp(LlamaModel& model, int64_t layer) {
  c10::InferenceMode normal_tensors(false);
  c10::NoGradGuard no_grad;
  const std::string down = LayerPrefix(layer) + "mlp.down_proj.weight";
  for (auto& [name, tensor] : model.NamedParameters())
    if (name == down) tensor.zero_();
}

std::vector<at::Tensor> AdapterParameters(const LlamaModel& model, int64_t layer) {
  std::vector<at::Tensor> out;
  for (const auto& [name, tensor] : model.NamedParameters())
    if (AdapterPart(name, layer) != nullptr) out.push_back(tensor);
  return out;
}

std::map<std::string, at::Tensor> AdapterTensors(const LlamaModel& model, int64_t layer) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, tensor] : model.NamedParameters())
    if (const char* part = AdapterPart(name, layer)) out[absl::StrCat(kFilePrefix, part)] = tensor.detach().cpu();
  return out;
}

absl::Status SaveKangarooAdapter(const std::string& path, const LlamaModel& model, int64_t layer, int64_t exit_layer,
                                 at::ScalarType dtype) {
  std::map<std::string, at::Tensor> tensors = AdapterTensors(model, layer);
  for (auto& [name, tensor] : tensors) tensor = tensor.to(dtype);
  tensors["exit_layer"] = at::tensor(std::vector<int64_t>{exit_layer}, at::kLong);
  return WriteSafetensors(path, tensors);
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LoadKangarooModel(const std::string& path, const LlamaModel& target,
                                                              int64_t kv_capacity) {
  ASSIGN_OR_RETURN(CheckpointTensors file, CheckpointTensors::Read(path, "a Kangaroo adapter"));
  ASSIGN_OR_RETURN(at::Tensor stored_exit, file.Take("exit_layer", {1}));
  if (stored_exit.scalar_type() != at::kLong)
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor 'exit_layer' holds ", stored_exit.scalar_type(),
                                                   ", expected int64"));
  const int64_t exit_layer = stored_exit[0].item<int64_t>();
  if (absl::Status fits = CheckExitLayer(target, exit_layer); !fits.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", fits.message()));
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, NewKangarooModel(target, exit_layer, kv_capacity, /*seed=*/0));
  file.Expect(absl::StrCat("a Kangaroo adapter after layer ", exit_layer, " of this target"));
  const std::string prefix = LayerPrefix(exit_layer);
  c10::InferenceMode normal_tensors(false);
  c10::NoGradGuard no_grad;
  for (auto& [name, tensor] : model->NamedParameters()) {
    for (const char* part : kAdapterParts) {
      if (name != prefix + part) continue;
      ASSIGN_OR_RETURN(at::Tensor stored, file.Take(absl::StrCat(kFilePrefix, part), tensor.sizes().vec()));
      tensor.copy_(stored);
    }
  }
  RETURN_IF_ERROR(file.Finish("an MLP or biases: Kangaroo's adapter is an attention block"));
  return model;
}

}  // namespace speclab
