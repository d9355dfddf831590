#include "framework/model/llama_model.h"
#include "framework/error_text.h"
#include "framework/model/llama_model_impl.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"
#include "framework/model/safetensors.h"
#include "yaml-cpp/yaml.h"

namespace speclab {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<LlamaModel::Impl>> LlamaModel::Impl::Create(const ModelConfig& config,
                                                                         c10::Device device, at::ScalarType dtype,
                                                                         int64_t kv_capacity, bool allocate) {
  RETURN_IF_ERROR(config.Validate());
  if (kv_capacity <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel: kv_capacity must be positive, got ", kv_capacity));
  }
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) {
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel: dtype must be float32, bfloat16 or float16, got ", c10::toString(dtype)));
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->dtype = dtype;
  impl->group = config.num_attention_heads / config.num_key_value_heads;
  impl->kept_layers = {static_cast<int>(config.num_hidden_layers)};
  RETURN_IF_ERROR(Guarded("LlamaModel: allocating weights", [&]() -> absl::Status {
    // Parameters must be ordinary tensors (trainable), whatever mode the caller is in.
    c10::InferenceMode normal_tensors(false);
    c10::AutoGradMode grad_mode(true);
    // Resolves "cuda" to "cuda:<current>" so device checks compare equal.
    impl->device = at::empty({0}, at::TensorOptions().device(device)).device();
    if (allocate) impl->AllocateParameters();
    impl->inv_freq = ComputeInvFreq(config).to(impl->device);
    impl->AllocateCache(kv_capacity);
    impl->static_shapes = impl->device.is_cuda() && CudaGraph::Supported();
    return absl::OkStatus();
  }));
  return impl;
}

void LlamaModel::Impl::AllocateLayers() {
  const ModelConfig& c = config;
  const int64_t hidden = c.hidden_size;
  const int64_t q_rows = c.num_attention_heads * c.head_dim;
  const int64_t kv_rows = c.num_key_value_heads * c.head_dim;
  const int64_t inter = c.intermediate_size;
  layers.resize(c.num_hidden_layers);
  for (LayerWeights& w : layers) {
    w.qkv_weight = at::empty({q_rows + 2 * kv_rows, hidden}, Options());
    w.q_weight = w.qkv_weight.narrow(0, 0, q_rows);
    w.k_weight = w.qkv_weight.narrow(0, q_rows, kv_rows);
    w.v_weight = w.qkv_weight.narrow(0, q_rows + kv_rows, kv_rows);
    if (c.attention_bias) {
      w.qkv_bias = at::empty({q_rows + 2 * kv_rows}, Options());
      w.q_bias = w.qkv_bias.narrow(0, 0, q_rows);
      w.k_bias = w.qkv_bias.narrow(0, q_rows, kv_rows);
      w.v_bias = w.qkv_bias.narrow(0, q_rows + kv_rows, kv_rows);
    }
    w.o_weight = at::empty({hidden, q_rows}, Options());
    if (c.attention_bias && c.model_type == "llama") w.o_bias = at::empty({hidden}, Options());
    w.gate_up_weight = at::empty({2 * inter, hidden}, Options());
    w.gate_weight = w.gate_up_weight.narrow(0, 0, inter);
    w.up_weight = w.gate_up_weight.narrow(0, inter, inter);
    w.down_weight = at::empty({hidden, inter}, Options());
    w.input_norm = at::empty({hidden}, Options());
    w.post_attention_norm = at::empty({hidden}, Options());
  }
}

void LlamaModel::Impl::AllocateParameters() {
  const int64_t hidden = config.hidden_size;
  embed = at::empty({config.vocab_size, hidden}, Options());
  AllocateLayers();
  final_norm = at::empty({hidden}, Options());
  lm_head = config.tie_word_embeddings ? embed : at::empty({config.vocab_size, hidden}, Options());
}

void LlamaModel::Impl::ShareEnds(const Impl& from) {
  // at::Tensor copies are handles: the same storage, nothing copied.
  embed = from.embed;
  final_norm = from.final_norm;
  lm_head = from.lm_head;
  static_shapes = from.static_shapes;
  batch_invariant = from.batch_invariant;
}

void LlamaModel::Impl::AllocateCache(int64_t kv_capacity) {
  const ModelConfig& c = config;
  capacity = kv_capacity;
  cache_slots = kv_capacity + kMaxTokenBucket;
  DropGraphs();  // they captured the old cache's addresses
  static_in = StaticInputs();
  committed = 0;
  tentative = 0;
  last_hidden = at::Tensor();
  {
    // The RoPE tables feed autograd in ForwardTraining: ordinary tensors.
    c10::InferenceMode normal_tensors(false);
    const at::Tensor angles =
        at::outer(at::arange(capacity, at::TensorOptions().dtype(at::kFloat).device(device)), inv_freq);
    const at::Tensor emb = at::cat({angles, angles}, -1);
    rope_cos = emb.cos().to(dtype);
    rope_sin = emb.sin().to(dtype);
  }
  // The cache is only touched under InferenceMode, so it can be an inference tensor.
  c10::InferenceMode guard;
  k_cache = at::zeros({c.num_hidden_layers, c.num_key_value_heads, cache_slots, c.head_dim}, Options());
  v_cache = at::zeros_like(k_cache);
  slot_positions = c.sliding_window > 0 ? at::zeros({cache_slots}, Options().dtype(at::kLong)) : at::Tensor();
}

std::vector<std::pair<std::string, at::Tensor>> LlamaModel::Impl::NamedParameters() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  out.emplace_back("model.embed_tokens.weight", embed);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& w = layers[i];
    const std::string p = absl::StrCat("model.layers.", i, ".");
    out.emplace_back(p + "self_attn.q_proj.weight", w.q_weight);
    if (w.q_bias.defined()) out.emplace_back(p + "self_attn.q_proj.bias", w.q_bias);
    out.emplace_back(p + "self_attn.k_proj.weight", w.k_weight);
    if (w.k_bias.defined()) out.emplace_back(p + "self_attn.k_proj.bias", w.k_bias);
    out.emplace_back(p + "self_attn.v_proj.weight", w.v_weight);
    if (w.v_bias.defined()) out.emplace_back(p + "self_attn.v_proj.bias", w.v_bias);
    out.emplace_back(p + "self_attn.o_proj.weight", w.o_weight);
    if (w.o_bias.defined()) out.emplace_back(p + "self_attn.o_proj.bias", w.o_bias);
    out.emplace_back(p + "mlp.gate_proj.weight", w.gate_weight);
    out.emplace_back(p + "mlp.up_proj.weight", w.up_weight);
    out.emplace_back(p + "mlp.down_proj.weight", w.down_weight);
    out.emplace_back(p + "input_layernorm.weight", w.input_norm);
    out.emplace_back(p + "post_attention_layernorm.weight", w.post_attention_norm);
  }
  out.emplace_back("model.norm.weight", final_norm);
  if (!config.tie_word_embeddings) out.emplace_back("lm_head.weight", lm_head);
  return out;
}

namespace {

absl::StatusOr<std::string> DtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return std::string("float32");
    case at::kBFloat16: return std::string("bfloat16");
    case at::kHalf: return std::string("float16");
    default:
      return absl::InvalidArgumentError(absl::StrCat("unsupported save dtype ", c10::toString(dtype)));
  }
}

// Tensors a checkpoint may carry that the model does not use.
bool IgnorableTensor(const std::string& name, const ModelConfig& config) {
  return (name == "lm_head.weight" && config.tie_word_embeddings) || absl::EndsWith(name, ".rotary_emb.inv_freq");
}

// The checkpoint files of a HuggingFace folder and, per tensor, the file the
// index promises it in (empty for a single file).
struct Checkpoint {
  std::vector<std::string> files;
  std::map<std::string, std::string> index;
  std::string index_path;
};

absl::StatusOr<Checkpoint> FindCheckpoint(const std::string& dir) {
  Checkpoint ckpt;
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(single)) {
    ckpt.files.push_back(single.string());
    return ckpt;
  }
  ckpt.index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  if (!fs::exists(ckpt.index_path)) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": no model.safetensors or model.safetensors.index.json in the model folder"));
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(ckpt.index_path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(ckpt.index_path, ": invalid JSON: ", e.msg));
  }
  const YAML::Node map = root.IsMap() ? root["weight_map"] : YAML::Node();
  if (!map.IsMap()) return absl::InvalidArgumentError(absl::StrCat(ckpt.index_path, ": key 'weight_map' missing"));
  std::set<std::string> seen;
  for (const auto& item : map) {
    if (!item.second.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ckpt.index_path, ": key 'weight_map.", item.first.Scalar(), "': expected a file name"));
    }
    const std::string file = (fs::path(dir) / item.second.Scalar()).string();
    ckpt.index[item.first.Scalar()] = file;
    if (seen.insert(file).second) ckpt.files.push_back(file);
  }
  return ckpt;
}

}  // namespace

// --- LlamaModel --------------------------------------------------------------

LlamaModel::LlamaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaModel::~LlamaModel() = default;

namespace {

// Norms 1, everything else normal(0, 0.02), drawn on the CPU in float32 so
// that every device and dtype gets the same model.
void DrawRandom(const std::vector<std::pair<std::string, at::Tensor>>& params, uint64_t seed) {
  c10::InferenceMode normal_tensors(false);
  c10::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  for (const auto& [name, param] : params) {
    at::Tensor values = at::empty(param.sizes(), at::TensorOptions().dtype(at::kFloat));
    if (absl::EndsWith(name, "norm.weight")) {
      values.fill_(1.0);
    } else {
      values.normal_(0.0, 0.02, gen);
    }
    param.copy_(values);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::CreateRandom(const ModelConfig& config, c10::Device device,
                                                                     at::ScalarType dtype, int64_t kv_capacity,
                                                                     uint64_t seed) {
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Create(config, device, dtype, kv_capacity));
  RETURN_IF_ERROR(Guarded("LlamaModel::CreateRandom", [&] {
    DrawRandom(impl->NamedParameters(), seed);
    return absl::OkStatus();
  }));
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::CreateRandomOnDevice(const ModelConfig& config,
                                                                             c10::Device device, at::ScalarType dtype,
                                                                             int64_t kv_capacity, uint64_t seed) {
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Create(config, device, dtype, kv_capacity));
  RETURN_IF_ERROR(Guarded("LlamaModel::CreateRandomOnDevice", [&]() -> absl::Status {
    c10::InferenceMode normal_tensors(false);
    c10::NoGradGuard no_grad;
    at::Generator gen = at::globalContext().defaultGenerator(impl->device).clone();
    gen.set_current_seed(seed);
    for (auto& [name, param] : impl->NamedParameters()) {
      if (absl::EndsWith(name, "norm.weight")) {
        param.fill_(1.0);
      } else {
        param.normal_(0.0, 0.02, gen);
      }
    }
    return absl::OkStatus();
  }));
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::ShareLayers(const LlamaModel& target,
                                                                    absl::Span<const int> layers,
                                                                    int64_t kv_capacity) {
  if (layers.empty()) return absl::InvalidArgumentError("LlamaModel::ShareLayers: no layers");
  return ShareLayersThenNew(target, layers, 0, kv_capacity, /*seed=*/0);
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::WithNewLayers(const LlamaModel& target, int64_t layers,
                                                                      int64_t kv_capacity, uint64_t seed) {
  if (layers < 1 || layers > 64)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::WithNewLayers: ", layers, " layers, expected 1 to 64"));
  return ShareLayersThenNew(target, {}, layers, kv_capacity, seed);
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::ShareLayersThenNew(const LlamaModel& target,
                                                                           absl::Span<const int> shared, int64_t added,
                                                                           int64_t kv_capacity, uint64_t seed) {
  const Impl& t = *target.impl_;
  for (int layer : shared) {
    if (layer < 0 || layer >= t.config.num_hidden_layers)
      return absl::InvalidArgumentError(absl::StrCat("LlamaModel: layer ", layer, " is outside the target's [0, ",
                                                     t.config.num_hidden_layers, ")"));
  }
  if (added < 0 || added > 64 || (shared.empty() && added == 0))
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel: ", shared.size(), " shared and ", added, " new layers: expected at least one, "
                     "and at most 64 new"));
  ModelConfig config = t.config;
  config.num_hidden_layers = static_cast<int64_t>(shared.size()) + added;
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Create(config, t.device, t.dtype, kv_capacity,
                                                            /*allocate=*/false));
  if (added > 0) {
    // The new layers alone first, drawn as WithNewLayers(target, added) draws them.
    impl->config.num_hidden_layers = added;
    RETURN_IF_ERROR(Guarded("LlamaModel::ShareLayersThenNew", [&] {
      impl->AllocateLayers();
      std::vector<std::pair<std::string, at::Tensor>> own;
      for (auto& named : impl->NamedParameters())
        if (absl::StartsWith(named.first, "model.layers.")) own.push_back(named);
      DrawRandom(own, seed);
      return absl::OkStatus();
    }));
    impl->config.num_hidden_layers = config.num_hidden_layers;
  }
  // The shared layers before them: handles to the target's tensors, nothing copied.
  std::vector<LayerWeights> layers;
  for (int layer : shared) layers.push_back(t.layers[layer]);
  for (LayerWeights& added_layer : impl->layers) layers.push_back(std::move(added_layer));
  impl->layers = std::move(layers);
  impl->ShareEnds(t);
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(impl)));
}

at::TensorOptions LlamaModel::parameter_options() const { return impl_->Options(); }

at::Tensor LlamaModel::Embed(const at::Tensor& tokens) const { return at::embedding(impl_->embed, tokens); }

at::Tensor LlamaModel::FinalNorm(const at::Tensor& hidden) const {
  return fused::RmsNorm(hidden, impl_->final_norm, impl_->config.rms_norm_eps);
}

at::Tensor LlamaModel::LmHead(const at::Tensor& hidden) const { return impl_->Logits(hidden).to(at::kFloat); }

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::string& dir, c10::Device device,
                                                             at::ScalarType dtype, int64_t kv_capacity) {
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat(dir, ": model folder not found"));
  ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromJsonFile((fs::path(dir) / "config.json").string()));
  ASSIGN_OR_RETURN(Checkpoint ckpt, FindCheckpoint(dir));
  ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, Impl::Create(config, device, dtype, kv_capacity));
  std::map<std::string, at::Tensor> expected;
  for (auto& [name, param] : impl->NamedParameters()) expected.emplace(name, param);
  std::set<std::string> loaded;
  // A checkpoint holds its weights in one floating dtype: a tensor in another
  // is a header that relabels its bytes (read as that dtype, they are garbage).
  std::string first_float;  // "FILE: tensor 'NAME' (BF16)", the first seen
  at::ScalarType float_dtype = at::kFloat;
  // One shard at a time keeps host memory at about one shard.
  for (const std::string& file : ckpt.files) {
    ASSIGN_OR_RETURN(auto tensors, ReadSafetensors(file));
    for (const auto& [name, tensor] : tensors) {
      if (at::isFloatingType(tensor.scalar_type())) {
        if (first_float.empty()) {
          float_dtype = tensor.scalar_type();
          first_float = absl::StrCat(file, ": tensor '", name, "' (", c10::toString(float_dtype), ")");
        } else if (tensor.scalar_type() != float_dtype) {
          return absl::InvalidArgumentError(absl::StrCat(
              file, ": tensor '", name, "' is ", c10::toString(tensor.scalar_type()), " but ", first_float,
              " is not: a checkpoint's weights share one dtype (a relabelled header?)"));
        }
      }
      auto it = expected.find(name);
      if (it == expected.end()) {
        if (IgnorableTensor(name, config)) continue;
        // Refused rather than skipped: an unused weight means the config
        // describes a different model than the checkpoint holds.
        return absl::InvalidArgumentError(absl::StrCat(file, ": unexpected tensor '", name, "' for a ",
                                                       config.model_type, " model with this config.json"));
      }
      if (tensor.sizes() != it->second.sizes()) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", name, "' has shape ",
                                                       ShapeString(tensor.sizes()), ", expected ",
                                                       ShapeString(it->second.sizes())));
      }
      RETURN_IF_ERROR(Guarded(absl::StrCat(file, ": tensor '", name, "'"), [&]() -> absl::Status {
        c10::InferenceMode normal_tensors(false);
        c10::NoGradGuard no_grad;
        it->second.copy_(tensor);
        return absl::OkStatus();
      }));
      // A NaN or infinite weight decodes as a model whose every row is NaN,
      // which the verifiers would measure as if it were a real one.
      if (!at::isfinite(it->second).all().item<bool>())
        return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", name, "' holds NaN or infinite values ",
                                                       "(in ", c10::toString(it->second.scalar_type()), ")"));
      loaded.insert(name);
    }
  }
  // Every tensor relabelled alike: bfloat16 and float16 have one size, so
  // only config.json (save_pretrained writes the weights' dtype) tells them
  // apart. Other mismatches (float32 weights of a bfloat16 model) are common
  // and harmless, and pass.
  const bool half_weights = float_dtype == at::kBFloat16 || float_dtype == at::kHalf;
  const at::ScalarType claimed = config.torch_dtype == "bfloat16" ? at::kBFloat16
                                 : config.torch_dtype == "float16" ? at::kHalf
                                                                   : at::ScalarType::Undefined;
  if (!first_float.empty() && half_weights && claimed != at::ScalarType::Undefined && claimed != float_dtype)
    return absl::InvalidArgumentError(absl::StrCat(first_float, " but config.json's torch_dtype is ",
                                                   config.torch_dtype, ": the two 16-bit types read as each other ",
                                                   "are garbage (a relabelled header?)"));
  for (const auto& [name, param] : expected) {
    if (loaded.count(name)) continue;
    auto where = ckpt.index.find(name);
    const std::string file = ckpt.index_path.empty() ? ckpt.files[0]
                             : where != ckpt.index.end() ? where->second
                                                         : ckpt.index_path;
    return absl::NotFoundError(absl::StrCat(file, ": tensor '", name, "' is missing"));
  }
  return std::unique_ptr<LlamaModel>(new LlamaModel(std::move(impl)));
}

absl::Status LlamaModel::Save(const std::string& dir, at::ScalarType save_dtype) const {
  ASSIGN_OR_RETURN(std::string dtype_name, DtypeName(save_dtype));
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create folder: ", error.message()));
  ModelConfig config = impl_->config;
  config.torch_dtype = dtype_name;
  RETURN_IF_ERROR(config.WriteJsonFile((fs::path(dir) / "config.json").string()));
  std::map<std::string, at::Tensor> tensors;
  RETURN_IF_ERROR(Guarded(absl::StrCat(dir, ": converting weights"), [&]() -> absl::Status {
    c10::NoGradGuard no_grad;
    for (const auto& [name, param] : impl_->NamedParameters()) {
      tensors.emplace(name, param.detach().to(at::kCPU, save_dtype).contiguous());
    }
    return absl::OkStatus();
  }));
  return WriteSafetensors((fs::path(dir) / "model.safetensors").string(), tensors);
}

const ModelConfig& LlamaModel::config() const { return impl_->config; }

void LlamaModel::EnableCudaGraphs(bool enable) { impl_->static_shapes = enable; }

void LlamaModel::SetBatchInvariant(bool enable) {
  if (enable == impl_->batch_invariant) return;
  impl_->batch_invariant = enable;
  impl_->DropGraphs();  // they captured the other kernels
}

bool LlamaModel::batch_invariant() const { return impl_->batch_invariant; }
int64_t LlamaModel::graph_captures() const { return impl_->captures; }
const std::map<int64_t, int64_t>& LlamaModel::executed_passes() const { return impl_->passes; }
bool LlamaModel::cuda_graphs_enabled() const { return impl_->static_shapes; }

int64_t LlamaModel::DecodeWeightBytes() const {
  int64_t bytes = 0;
  for (const auto& [name, param] : impl_->NamedParameters()) {
    if (name == "model.embed_tokens.weight" && !impl_->config.tie_word_embeddings) continue;  // one row per step
    bytes += param.numel() * static_cast<int64_t>(param.element_size());
  }
  return bytes;
}
c10::Device LlamaModel::device() const { return impl_->device; }
int64_t LlamaModel::capacity() const { return impl_->capacity; }
int64_t LlamaModel::committed_length() const { return impl_->committed; }
int64_t LlamaModel::tentative_length() const { return impl_->tentative; }
absl::Status LlamaModel::KeepHiddenStates(absl::Span<const int> layers) {
  Impl& m = *impl_;
  std::vector<int> kept = m.kept_layers;
  for (int layer : layers) {
    ASSIGN_OR_RETURN(int index, HiddenStateIndex(layer, m.config.num_hidden_layers));
    kept.push_back(index);
  }
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  if (kept == m.kept_layers) return absl::OkStatus();
  m.kept_layers = std::move(kept);
  m.last_hidden = at::Tensor();
  m.DropGraphs();  // they return the states they captured
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> LlamaModel::HiddenStates(int layer) const {
  const Impl& m = *impl_;
  ASSIGN_OR_RETURN(int index, HiddenStateIndex(layer, m.config.num_hidden_layers));
  const auto it = std::lower_bound(m.kept_layers.begin(), m.kept_layers.end(), index);
  if (it == m.kept_layers.end() || *it != index)
    return absl::FailedPreconditionError(
        absl::StrCat("LlamaModel: hidden state ", layer, " is not kept (KeepHiddenStates before the forward)"));
  if (!m.last_hidden.defined())
    return absl::FailedPreconditionError(
        "LlamaModel: no hidden states (they follow Forward, ForwardAt, ForwardTreeAt)");
  return m.last_hidden[it - m.kept_layers.begin()];
}

absl::StatusOr<at::Tensor> LlamaModel::Forward(const at::Tensor& tokens, const at::Tensor& positions,
                                               const at::Tensor& mask) {
  absl::StatusOr<at::Tensor> logits =
      Guarded("LlamaModel::Forward", [&] { return impl_->Forward(tokens, positions, mask); });
  if (logits.ok()) CountForward(tokens.size(0));
  return logits;
}

absl::StatusOr<at::Tensor> LlamaModel::ForwardEmbedded(const at::Tensor& inputs, const at::Tensor& positions,
                                                       const at::Tensor& mask) {
  absl::StatusOr<at::Tensor> logits = Guarded("LlamaModel::ForwardEmbedded", [&]() -> absl::StatusOr<at::Tensor> {
    RETURN_IF_ERROR(impl_->ValidateInputs(inputs, positions, mask));
    c10::InferenceMode guard;
    return impl_->ForwardEager(at::Tensor(), positions, mask, inputs);
  });
  if (logits.ok()) CountForward(inputs.size(0));
  return logits;
}

void LlamaModel::CountChainForwards(int64_t first_tokens, int64_t steps, const ChainResult& result) {
  if (first_tokens > 0) CountForward(first_tokens);
  if (impl_->last_chain_skips) {
    CountForwardsOnDevice(1, result.kept - 1);  // the steps before the stop
  } else {
    for (int64_t i = 1; i < steps; ++i) CountForward(1);
  }
}

absl::StatusOr<ChainResult> LlamaModel::ForwardChain(const at::Tensor& first, int64_t position, int64_t steps,
                                                     const ChainPick& pick) {
  Impl& m = *impl_;
  const bool chain = m.static_shapes && m.config.sliding_window == 0 && steps >= 1 && steps <= kMaxChainSteps;
  if (!chain) return m.WithoutHiddenStates(DeviceModel::ForwardChain(first, position, steps, pick));
  if (!first.defined() || first.dim() != 1 || first.size(0) != 1 || first.scalar_type() != at::kLong ||
      first.device() != m.device)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::ForwardChain: the first token must be int64 [1] on ",
                                                   m.device.str()));
  if (position < 0) return absl::InvalidArgumentError("LlamaModel::ForwardChain: negative position");
  if (m.committed + m.tentative + steps > m.capacity)
    return absl::ResourceExhaustedError(absl::StrCat("LlamaModel::ForwardChain: ", steps, " more tokens exceed the KV "
                                                     "capacity ", m.capacity, " (", m.committed + m.tentative,
                                                     " slots in use)"));
  absl::StatusOr<ChainResult> result = Guarded("LlamaModel::ForwardChain", [&] {
    c10::InferenceMode guard;
    return m.ForwardChainStatic(first, position, steps, pick);
  });
  if (result.ok()) CountChainForwards(1, steps, *result);
  return result;
}

// Checks a growth on features: its root, its inputs, and room for `fed` slots.
absl::Status LlamaModel::Impl::ValidateFeatureGrowth(const char* what, const FeatureRoot& root,
                                                     const NodeInputs& inputs, int64_t fed) const {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::", what, ": ", why));
  };
  if (!root.token.defined() || root.token.dim() != 1 || root.token.size(0) != 1 ||
      root.token.scalar_type() != at::kLong || root.token.device() != device)
    return bad(absl::StrCat("the root token must be int64 [1] on ", device.str()));
  if (!root.logits.defined() || root.logits.dim() != 2 || root.logits.size(0) != 1 ||
      root.logits.size(1) != config.vocab_size || root.logits.scalar_type() != at::kFloat ||
      root.logits.device() != device)
    return bad(absl::StrCat("the root's logits must be float32 [1, ", config.vocab_size, "] on ", device.str()));
  if (!root.feature.defined() || root.feature.dim() != 2 || root.feature.size(0) != 1 ||
      root.feature.size(1) != config.hidden_size || root.feature.device() != device)
    return bad(absl::StrCat("the root's feature must be [1, ", config.hidden_size, "] on ", device.str()));
  if (root.position < 0) return bad("negative root position");
  if (!inputs.defined()) return bad("the node inputs have no function");
  if (committed + tentative + fed > capacity)
    return absl::ResourceExhaustedError(absl::StrCat("LlamaModel::", what, ": ", fed, " more tokens exceed the KV ",
                                                     "capacity ", capacity, " (", committed + tentative,
                                                     " slots in use)"));
  return absl::OkStatus();
}

absl::StatusOr<ChainResult> LlamaModel::ForwardChainOnFeatures(const FeatureRoot& root, int64_t steps,
                                                               const ChainPick& pick, const NodeInputs& inputs) {
  Impl& m = *impl_;
  if (steps < 1)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::ForwardChainOnFeatures: steps must be >= 1, got ", steps));
  if (pick.reads_hidden())
    return absl::InvalidArgumentError("LlamaModel::ForwardChainOnFeatures: feature chains give picks no hidden states");
  RETURN_IF_ERROR(m.ValidateFeatureGrowth("ForwardChainOnFeatures", root, inputs, steps - 1));
  if (m.static_shapes && m.config.sliding_window == 0 && steps <= kMaxChainSteps) {
    absl::StatusOr<ChainResult> result = Guarded("LlamaModel::ForwardChainOnFeatures", [&] {
      c10::InferenceMode guard;
      return m.ForwardChainOnFeaturesStatic(root, steps, pick, inputs);
    });
    if (result.ok()) CountChainForwards(0, steps, *result);
    return result;
  }
  // The eager forwards, token j fed with the feature after token j - 1.
  at::Tensor feature = root.feature;
  absl::StatusOr<ChainResult> result = Guarded("LlamaModel::ForwardChainOnFeatures", [&] {
    c10::InferenceMode guard;
    return PickEach(root.token, steps, m.config.vocab_size, pick,
                    [&](int64_t i, const at::Tensor& token) -> absl::StatusOr<at::Tensor> {
                      if (i == 0) return root.logits;
                      const at::Tensor position = at::full({1}, root.position + i, root.token.options());
                      ASSIGN_OR_RETURN(at::Tensor logits, ForwardEmbedded(inputs(Embed(token), feature), position,
                                                                          at::Tensor()));
                      feature = m.last_hidden[-1];
                      return logits;
                    });
  });
  return m.WithoutHiddenStates(std::move(result));
}

absl::StatusOr<LevelsKept> LlamaModel::ForwardLevelsOnFeatures(const FeatureRoot& root, int64_t levels,
                                                               const LevelPick& pick, const NodeInputs& inputs) {
  Impl& m = *impl_;
  if (levels < 1 || !pick.defined() || pick.width() < 1)
    return absl::InvalidArgumentError("LlamaModel::ForwardLevelsOnFeatures: expected levels >= 1 and a pick of width >= 1");
  const int64_t fed = levels * pick.width();
  RETURN_IF_ERROR(m.ValidateFeatureGrowth("ForwardLevelsOnFeatures", root, inputs, fed));
  if (m.static_shapes && m.config.sliding_window == 0 && fed <= kMaxTokenBucket) {
    absl::StatusOr<LevelsKept> kept = Guarded("LlamaModel::ForwardLevelsOnFeatures", [&] {
      c10::InferenceMode guard;
      return m.ForwardLevelsOnFeaturesStatic(root, levels, pick, inputs);
    });
    if (kept.ok()) CountLevelForwards(0, levels, pick.width());
    return kept;
  }
  // The eager forwards; every fed node's feature, in feeding order (the root first).
  at::Tensor features = root.feature;
  absl::StatusOr<LevelsKept> kept = Guarded("LlamaModel::ForwardLevelsOnFeatures", [&] {
    c10::InferenceMode guard;
    return GrowLevels(root.logits, m.tentative, levels, pick,
                      [&](const LevelFeed& level) -> absl::StatusOr<at::Tensor> {
                        const at::Tensor x = inputs(Embed(level.tokens), features.index_select(0, level.parents));
                        ASSIGN_OR_RETURN(at::Tensor logits,
                                         ForwardEmbedded(x, level.depths + root.position, level.visible));
                        features = at::cat({features, m.last_hidden[-1]});
                        return logits;
                      });
  });
  return m.WithoutHiddenStates(std::move(kept));
}

namespace {

absl::Status ValidatePath(const FeaturePathAt& path, const ModelConfig& config, c10::Device device) {
  const int64_t w = path.tokens.defined() && path.tokens.dim() == 1 ? path.tokens.size(0) : 0;
  auto device_longs = [&](const at::Tensor& t, int64_t size) {
    return t.defined() && t.dim() == 1 && t.size(0) == size && t.scalar_type() == at::kLong && t.device() == device;
  };
  if (w < 1 || !device_longs(path.tokens, w) || !device_longs(path.length, 1) || !device_longs(path.position, 1) ||
      !path.features.defined() || path.features.dim() != 2 || path.features.size(0) != w ||
      path.features.size(1) != config.hidden_size || path.features.device() != device)
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel: a feature path needs tokens int64 [w >= 1], features [w, ", config.hidden_size,
        "], length and position int64 [1], all on ", device.str()));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FeatureRoot> LlamaModel::FeedPathEagerly(const FeaturePathAt& path, const NodeInputs& inputs) {
  Impl& m = *impl_;
  return Guarded("LlamaModel: a feature path", [&]() -> absl::StatusOr<FeatureRoot> {
    c10::InferenceMode guard;
    const at::Tensor read = at::cat({path.slot.start, path.length, path.position}).to(at::kCPU);  // the synchronisation
    const int64_t slot = read[0].item<int64_t>(), length = read[1].item<int64_t>();
    const int64_t position = read[2].item<int64_t>();
    if (length < 1 || length > path.tokens.size(0) || slot < 0 || slot > m.committed + m.tentative)
      return absl::InvalidArgumentError(absl::StrCat("LlamaModel: a feature path of ", length, " rows of ",
                                                     path.tokens.size(0), " at slot ", slot, " (",
                                                     m.committed + m.tentative, " slots written)"));
    m.committed = slot;
    m.tentative = 0;
    const at::Tensor tokens = path.tokens.narrow(0, 0, length);
    ASSIGN_OR_RETURN(at::Tensor logits,
                     ForwardEmbedded(inputs(Embed(tokens), path.features.narrow(0, 0, length).to(m.dtype)),
                                     at::arange(position, position + length, tokens.options()), at::Tensor()));
    const at::Tensor feature = m.last_hidden[-1].narrow(0, length - 1, 1);
    m.committed += m.tentative;
    m.tentative = 0;
    return FeatureRoot{.token = tokens.narrow(0, length - 1, 1), .logits = logits.narrow(0, length - 1, 1),
                       .feature = feature, .position = position + length - 1};
  });
}

absl::StatusOr<ChainResult> LlamaModel::ForwardChainOnFeaturesAt(const FeaturePathAt& path, int64_t steps,
                                                                 const ChainPick& pick, const NodeInputs& inputs) {
  Impl& m = *impl_;
  RETURN_IF_ERROR(ValidatePath(path, m.config, m.device));
  const int64_t w = path.tokens.size(0);
  if (steps < 1 || !inputs.defined())
    return absl::InvalidArgumentError("LlamaModel::ForwardChainOnFeaturesAt: expected steps >= 1 and node inputs");
  if (!m.static_shapes || m.config.sliding_window > 0 || steps > kMaxChainSteps || w + steps > kMaxTokenBucket) {
    ASSIGN_OR_RETURN(FeatureRoot root, FeedPathEagerly(path, inputs));
    return ForwardChainOnFeatures(root, steps, pick, inputs);
  }
  RETURN_IF_ERROR(m.ValidateAt("ForwardChainOnFeaturesAt", path.tokens, path.slot, w + steps - 1));
  absl::StatusOr<ChainResult> result = Guarded("LlamaModel::ForwardChainOnFeaturesAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardChainOnFeaturesAtStatic(path, steps, pick, inputs);
  });
  if (result.ok()) CountChainForwards(w, steps, *result);
  return result;
}

absl::StatusOr<LevelsKept> LlamaModel::ForwardLevelsOnFeaturesAt(const FeaturePathAt& path, int64_t levels,
                                                                 const LevelPick& pick, const NodeInputs& inputs) {
  Impl& m = *impl_;
  RETURN_IF_ERROR(ValidatePath(path, m.config, m.device));
  const int64_t w = path.tokens.size(0);
  if (levels < 1 || !pick.defined() || pick.width() < 1 || !inputs.defined())
    return absl::InvalidArgumentError(
        "LlamaModel::ForwardLevelsOnFeaturesAt: expected levels >= 1, a pick of width >= 1 and node inputs");
  const int64_t fed = w + levels * pick.width();
  if (!m.static_shapes || m.config.sliding_window > 0 || fed > kMaxTokenBucket) {
    ASSIGN_OR_RETURN(FeatureRoot root, FeedPathEagerly(path, inputs));
    return ForwardLevelsOnFeatures(root, levels, pick, inputs);
  }
  RETURN_IF_ERROR(m.ValidateAt("ForwardLevelsOnFeaturesAt", path.tokens, path.slot, fed));
  absl::StatusOr<LevelsKept> kept = Guarded("LlamaModel::ForwardLevelsOnFeaturesAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardLevelsOnFeaturesAtStatic(path, levels, pick, inputs);
  });
  if (kept.ok()) CountLevelForwards(w, levels, pick.width());
  return kept;
}

absl::StatusOr<at::Tensor> LlamaModel::ForwardAt(const at::Tensor& tokens, const DevicePosition& at) {
  Impl& m = *impl_;
  const bool fits_static = m.static_shapes && m.config.sliding_window == 0 && tokens.defined() && tokens.dim() == 1 &&
                           tokens.size(0) <= kMaxTokenBucket;
  if (!fits_static) return DeviceModel::ForwardAt(tokens, at);
  RETURN_IF_ERROR(m.ValidateAt("ForwardAt", tokens, at, tokens.size(0)));
  absl::StatusOr<at::Tensor> logits = Guarded("LlamaModel::ForwardAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardAtStatic(tokens, at);
  });
  if (logits.ok()) CountForward(tokens.size(0));
  return logits;
}

absl::StatusOr<ChainResult> LlamaModel::ForwardChainAt(const at::Tensor& prefix, const DevicePosition& at,
                                                       int64_t steps, const ChainPick& pick) {
  Impl& m = *impl_;
  const bool chain = m.static_shapes && m.config.sliding_window == 0 && steps >= 1 && steps <= kMaxChainSteps &&
                     prefix.defined() && prefix.dim() == 1 && prefix.size(0) <= kMaxChainPrefix;
  if (!chain) return m.WithoutHiddenStates(DeviceModel::ForwardChainAt(prefix, at, steps, pick));
  RETURN_IF_ERROR(m.ValidateAt("ForwardChainAt", prefix, at, prefix.size(0) + steps - 1));
  absl::StatusOr<ChainResult> result = Guarded("LlamaModel::ForwardChainAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardChainAtStatic(prefix, at, steps, pick);
  });
  if (result.ok()) CountChainForwards(prefix.size(0), steps, *result);
  return result;
}

absl::StatusOr<ChainResult> LlamaModel::ForwardChainInRoundsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                                int64_t steps, const ChainPick& pick,
                                                                const ChainGuess& guess, const at::Tensor& context) {
  Impl& m = *impl_;
  const bool chain = m.static_shapes && m.config.sliding_window == 0 && steps >= 1 && steps <= kMaxChainSteps &&
                     prefix.defined() && prefix.dim() == 1 && prefix.size(0) <= kMaxChainPrefix;
  if (!chain)
    return m.WithoutHiddenStates(DeviceModel::ForwardChainInRoundsAt(prefix, at, steps, pick, guess, context));
  RETURN_IF_ERROR(CheckRounds(prefix.size(0), steps, pick, guess));
  RETURN_IF_ERROR(m.ValidateAt("ForwardChainInRoundsAt", prefix, at, prefix.size(0) + steps - 1));
  if (!context.defined() || context.dim() != 1 || context.scalar_type() != at::kLong || context.device() != m.device)
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel::ForwardChainInRoundsAt: the context must be int64 [n] on ", m.device.str()));
  absl::StatusOr<ChainResult> result = Guarded("LlamaModel::ForwardChainInRoundsAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardChainInRoundsAtStatic(prefix, at, steps, pick, guess, context);
  });
  if (result.ok()) {
    CountForward(prefix.size(0) + guess.count());
    CountForwardsOnDevice(1 + guess.count(), m.last_later_rounds);
  }
  return result;
}

absl::StatusOr<LevelsKept> LlamaModel::ForwardLevels(const at::Tensor& prefix, int64_t position, int64_t levels,
                                                     const LevelPick& pick) {
  Impl& m = *impl_;
  if (!m.LevelsFitGraph(prefix, levels, pick))
    return m.WithoutHiddenStates(DeviceModel::ForwardLevels(prefix, position, levels, pick));
  if (!pick.defined()) return absl::InvalidArgumentError("LlamaModel::ForwardLevels: pick has no function");
  if (prefix.size(0) < 1 || prefix.scalar_type() != at::kLong || prefix.device() != m.device)
    return absl::InvalidArgumentError(
        absl::StrCat("LlamaModel::ForwardLevels: the prefix must be int64 [c >= 1] on ", m.device.str()));
  if (position < 0) return absl::InvalidArgumentError("LlamaModel::ForwardLevels: negative position");
  const int64_t fed = prefix.size(0) + pick.width() * levels;
  if (m.committed + m.tentative + fed > m.capacity)
    return absl::ResourceExhaustedError(absl::StrCat("LlamaModel::ForwardLevels: ", fed,
                                                     " more tokens exceed the KV capacity ", m.capacity, " (",
                                                     m.committed + m.tentative, " slots in use)"));
  absl::StatusOr<LevelsKept> kept = Guarded("LlamaModel::ForwardLevels", [&] {
    c10::InferenceMode guard;
    return m.ForwardLevelsStatic(prefix, position, levels, pick);
  });
  if (kept.ok()) CountLevelForwards(prefix.size(0), levels, pick.width());
  return kept;
}

// ForwardLevels' forwards as the default's Forward() calls count them.
void LlamaModel::CountLevelForwards(int64_t prefix, int64_t levels, int64_t width) {
  if (prefix > 0) CountForward(prefix);
  if (impl_->last_levels_fed.defined()) {
    CountForwardsOnDevice(width, impl_->last_levels_fed);  // the levels before the stop
    return;
  }
  for (int64_t i = 0; i < levels; ++i) CountForward(width);
}

absl::StatusOr<at::Tensor> LlamaModel::ForwardTreeAt(const at::Tensor& tokens, const at::Tensor& depths,
                                                     const at::Tensor& mask, const DevicePosition& at) {
  Impl& m = *impl_;
  const bool fits_static = m.static_shapes && m.config.sliding_window == 0 && tokens.defined() && tokens.dim() == 1 &&
                           tokens.size(0) <= kMaxTokenBucket;
  if (!fits_static) return DeviceModel::ForwardTreeAt(tokens, depths, mask, at);
  RETURN_IF_ERROR(m.ValidateAt("ForwardTreeAt", tokens, at, tokens.size(0)));
  const int64_t n = tokens.size(0);
  if (!depths.defined() || depths.dim() != 1 || depths.size(0) != n || depths.scalar_type() != at::kLong ||
      depths.device() != m.device || !mask.defined() || mask.dim() != 2 || mask.size(0) != n || mask.size(1) != n ||
      mask.scalar_type() != at::kBool || mask.device() != m.device)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::ForwardTreeAt: depths must be int64 [", n,
                                                   "] and mask bool [", n, ", ", n, "] on ", m.device.str()));
  absl::StatusOr<at::Tensor> logits = Guarded("LlamaModel::ForwardTreeAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardTreeAtStatic(tokens, depths, mask, at);
  });
  if (logits.ok()) CountForward(n);
  return logits;
}

absl::Status LlamaModel::CompactPathAt(const at::Tensor& nodes, const DevicePosition& at) {
  Impl& m = *impl_;
  if (!m.static_shapes || m.config.sliding_window > 0) return DeviceModel::CompactPathAt(nodes, at);
  if (!nodes.defined() || nodes.dim() != 1 || nodes.size(0) < 1 || nodes.size(0) >= kMaxTokenBucket ||
      nodes.scalar_type() != at::kLong || nodes.device() != m.device)
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::CompactPathAt: nodes must be int64 [m], 1 <= m < ",
                                                   kMaxTokenBucket, ", on ", m.device.str()));
  RETURN_IF_ERROR(m.ValidateAt("CompactPathAt", nodes, at, nodes.size(0) + 1));
  return Guarded("LlamaModel::CompactPathAt", [&] {
    c10::InferenceMode guard;
    fused::MovePathEntries(m.k_cache, m.v_cache, at.start, nodes);
    return absl::OkStatus();
  });
}

absl::StatusOr<LevelsKept> LlamaModel::ForwardLevelsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                       int64_t levels, const LevelPick& pick) {
  Impl& m = *impl_;
  if (!m.LevelsFitGraph(prefix, levels, pick))
    return m.WithoutHiddenStates(DeviceModel::ForwardLevelsAt(prefix, at, levels, pick));
  if (!pick.defined()) return absl::InvalidArgumentError("LlamaModel::ForwardLevelsAt: pick has no function");
  RETURN_IF_ERROR(m.ValidateAt("ForwardLevelsAt", prefix, at, prefix.size(0) + levels * pick.width()));
  absl::StatusOr<LevelsKept> kept = Guarded("LlamaModel::ForwardLevelsAt", [&] {
    c10::InferenceMode guard;
    return m.ForwardLevelsAtStatic(prefix, at, levels, pick);
  });
  if (kept.ok()) CountLevelForwards(prefix.size(0), levels, pick.width());
  return kept;
}

absl::Status LlamaModel::Commit(absl::Span<const int64_t> tentative_slots) {
  return Guarded("LlamaModel::Commit", [&] { return impl_->Commit(tentative_slots); });
}

absl::Status LlamaModel::PrepareForDecoding(int64_t max_tokens) {
  return Guarded("LlamaModel::PrepareForDecoding", [&] { return impl_->PrepareForDecoding(max_tokens); });
}

absl::Status LlamaModel::Truncate(int64_t length) {
  if (length < 0 || length > impl_->committed) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::Truncate: length ", length, " outside [0, ",
                                                   impl_->committed, "] (the committed length)"));
  }
  impl_->committed = length;
  impl_->tentative = 0;
  return absl::OkStatus();
}

namespace {

// The training forwards' signatures have no Status: a failure prints the
// reason and gives an undefined tensor rather than throwing.
template <typename Fn>
at::Tensor PrintingFailures(const char* what, Fn&& fn) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%s: %s\n", what, e.what_without_backtrace());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", what, ErrorText(e));
  }
  return at::Tensor();
}

}  // namespace

at::Tensor LlamaModel::ForwardTraining(const at::Tensor& tokens) {
  return PrintingFailures("LlamaModel::ForwardTraining", [&] { return impl_->ForwardTraining(tokens); });
}

at::Tensor LlamaModel::ForwardTrainingEmbedded(const at::Tensor& inputs, int64_t first_position) {
  return PrintingFailures("LlamaModel::ForwardTrainingEmbedded",
                          [&] { return impl_->ForwardTrainingEmbedded(inputs, first_position); });
}

absl::StatusOr<std::vector<at::Tensor>> LlamaModel::ForwardTrainingLayers(const at::Tensor& inputs,
                                                                          const at::Tensor& positions,
                                                                          const at::Tensor& allowed,
                                                                          absl::Span<const int> layers) {
  std::vector<int> indices;
  for (int layer : layers) {
    ASSIGN_OR_RETURN(const int index, HiddenStateIndex(layer, impl_->config.num_hidden_layers));
    indices.push_back(index);
  }
  if (indices.empty()) return absl::InvalidArgumentError("LlamaModel::ForwardTrainingLayers: no hidden state asked for");
  const int64_t r = inputs.dim() == 3 ? inputs.size(1) : -1;
  if (inputs.dim() != 3 || inputs.size(2) != impl_->config.hidden_size || positions.dim() != 1 ||
      positions.size(0) != r || allowed.dim() != 2 || allowed.size(0) != r || allowed.size(1) != r)
    return absl::InvalidArgumentError(absl::StrCat(
        "LlamaModel::ForwardTrainingLayers: expected inputs [B, R, ", impl_->config.hidden_size,
        "], positions [R] and a mask [R, R]; got [", absl::StrJoin(inputs.sizes(), ", "), "], [",
        absl::StrJoin(positions.sizes(), ", "), "], [", absl::StrJoin(allowed.sizes(), ", "), "]"));
  try {
    return impl_->TrainingLayers(inputs, positions, allowed, indices);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("LlamaModel::ForwardTrainingLayers: ", ErrorText(e)));
  }
}

std::vector<std::pair<std::string, at::Tensor>> LlamaModel::NamedParameters() const {
  return impl_->NamedParameters();
}

absl::Status LlamaModel::ResetCache(int64_t kv_capacity) {
  if (kv_capacity <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("LlamaModel::ResetCache: kv_capacity must be positive, got ",
                                                   kv_capacity));
  }
  return Guarded("LlamaModel::ResetCache", [&]() -> absl::Status {
    impl_->AllocateCache(kv_capacity);
    return absl::OkStatus();
  });
}

}  // namespace speclab
