#include "drafters/eagle/eagle_head.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "framework/model/safetensors.h"

namespace speclab {
namespace {

constexpr char kBodyPrefix[] = "model.layers.";  // LlamaModel's names of the body's layers
constexpr char kFilePrefix[] = "layers.";        // and the checkpoint's

// The checkpoint name of a body parameter ("" for the target's shared ones).
std::string FileName(const std::string& body_name) {
  if (!absl::StartsWith(body_name, kBodyPrefix)) return "";
  return absl::StrCat(kFilePrefix, body_name.substr(sizeof(kBodyPrefix) - 1));
}

// fc([embedded, features]), fc = (weight, bias).
at::Tensor FuseEmbedded(const std::tuple<at::Tensor, at::Tensor>& fc, const at::Tensor& embedded,
                        const at::Tensor& features) {
  const auto& [weight, bias] = fc;
  return at::linear(at::cat({embedded, features.to(weight.scalar_type())}, -1), weight, bias);
}

}  // namespace

at::Tensor EagleHead::Fuse(const at::Tensor& tokens, const at::Tensor& features) const {
  return FuseEmbedded({fc_weight, fc_bias}, body->Embed(tokens), features);
}

at::Tensor EagleHead::TargetFeature(const std::vector<at::Tensor>& hidden) const {
  if (!fuses()) return hidden.at(0);
  return at::linear(at::cat(hidden, -1).to(fuse_weight.scalar_type()), fuse_weight);
}

NodeInputs EagleHead::Inputs() const { return NodeInputs::Of(&FuseEmbedded, std::make_tuple(fc_weight, fc_bias)); }

std::map<std::string, at::Tensor> EagleHead::Tensors() const {
  std::map<std::string, at::Tensor> out{{"fc.weight", fc_weight.detach().cpu()}, {"fc.bias", fc_bias.detach().cpu()}};
  if (fuses()) {
    out["fuse.weight"] = fuse_weight.detach().cpu();
    out["fuse.layers"] = at::tensor(std::vector<int64_t>(feature_layers.begin(), feature_layers.end()), at::kLong);
  }
  for (const auto& [name, tensor] : body->NamedParameters())
    if (std::string file = FileName(name); !file.empty()) out[file] = tensor.detach().cpu();
  return out;
}

absl::StatusOr<EagleHead> NewEagleHead(const LlamaModel& target, int64_t layers, int64_t kv_capacity, uint64_t seed,
                                       const std::vector<int>& feature_layers) {
  const int64_t num_layers = target.config().num_hidden_layers;
  std::vector<int> resolved;
  for (int layer : feature_layers) {
    ASSIGN_OR_RETURN(const int index, HiddenStateIndex(layer, num_layers));
    if (std::find(resolved.begin(), resolved.end(), index) != resolved.end())
      return absl::InvalidArgumentError(absl::StrCat("feature layer ", layer, " is listed twice (layers 0 to ",
                                                     num_layers, ", -1 the final norm's output)"));
    resolved.push_back(index);
  }
  if (resolved.empty()) return absl::InvalidArgumentError("an EAGLE head reads at least one feature layer");
  EagleHead head;
  ASSIGN_OR_RETURN(head.body, LlamaModel::WithNewLayers(target, layers, kv_capacity, seed));
  head.feature_layers = feature_layers;
  const int64_t hidden = target.config().hidden_size;
  c10::InferenceMode normal_tensors(false);
  c10::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed + 1);
  head.fc_weight = at::empty({hidden, 2 * hidden}, at::kFloat).normal_(0.0, 0.02, gen).to(target.parameter_options());
  head.fc_bias = at::zeros({hidden}, target.parameter_options());
  if (head.fuses()) {
    const auto fused = static_cast<int64_t>(feature_layers.size()) * hidden;
    head.fuse_weight = at::empty({hidden, fused}, at::kFloat).normal_(0.0, 0.02, gen).to(target.parameter_options());
  }
  return head;
}

absl::StatusOr<std::vector<int>> Eagle3FeatureLayers(int64_t num_layers) {
  const std::vector<int> layers = {2, static_cast<int>(num_layers / 2), static_cast<int>(num_layers - 3)};
  if (!(layers[0] < layers[1] && layers[1] < layers[2]))
    return absl::InvalidArgumentError(absl::StrCat("EAGLE-3's layers (2, L / 2, L - 3) are not distinct for a target of ",
                                                   num_layers, " layers: name three in feature_layers"));
  return layers;
}

absl::StatusOr<std::vector<at::Tensor>> UnrollHead(const EagleHead& head, const at::Tensor& tokens,
                                                   const std::vector<at::Tensor>& target_layers, int64_t steps) {
  const int64_t t = tokens.dim() == 2 ? tokens.size(1) : 0;
  if (t < 2 || steps < 1 || steps >= t)
    return absl::InvalidArgumentError(absl::StrCat("UnrollHead: ", steps, " steps need windows [B, T] with T > ",
                                                   steps, "; got [", absl::StrJoin(tokens.sizes(), ", "), "]"));
  if (target_layers.size() != head.feature_layers.size())
    return absl::InvalidArgumentError(absl::StrCat("UnrollHead: the head reads ", head.feature_layers.size(),
                                                   " target layers; got ", target_layers.size()));
  const c10::Device device = head.fc_weight.device();
  const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor committed = head.TargetFeature(target_layers).narrow(1, 0, t - 1);  // the feature of x_i
  std::vector<at::Tensor> inputs, positions, chain, origin, predicted;
  for (int64_t j = 1; j <= steps; ++j) {
    const int64_t m = t - j;  // the origins i whose step j token x_{i+j} is in the window
    const at::Tensor parents = j == 1 ? committed : predicted.back().narrow(1, 0, m);
    inputs.push_back(head.Fuse(tokens.narrow(1, j, m).to(device), parents));
    origin.push_back(at::arange(m, longs));
    positions.push_back(origin.back() + j);
    chain.push_back(at::full({m}, j, longs));
    const at::Tensor row_step = at::cat(chain).unsqueeze(1), row_origin = at::cat(origin).unsqueeze(1);
    const at::Tensor col_step = row_step.t(), col_origin = row_origin.t();
    // Step 1's entries are the committed ones (causal); a later step's
    // entry sees those up to its origin and its own chain's before it.
    const at::Tensor allowed = (col_step == 1 & col_origin <= row_origin) |
                               (col_step > 1 & col_step <= row_step & col_origin == row_origin);
    ASSIGN_OR_RETURN(std::vector<at::Tensor> out,
                     head.body->ForwardTrainingLayers(at::cat(inputs, 1), at::cat(positions), allowed, {-1}));
    predicted.push_back(out[0].narrow(1, out[0].size(1) - m, m));
  }
  return predicted;
}

absl::StatusOr<EagleHead> LoadEagleHead(const std::string& path, const LlamaModel& target, int64_t kv_capacity) {
  ASSIGN_OR_RETURN(CheckpointTensors file, CheckpointTensors::Read(path, "an EAGLE head"));
  int64_t layers = 0;
  for (const std::string& name : file.Names()) {
    if (!absl::StartsWith(name, kFilePrefix)) continue;
    const std::string rest = name.substr(sizeof(kFilePrefix) - 1);
    int64_t index = 0;
    if (!absl::SimpleAtoi(rest.substr(0, rest.find('.')), &index) || index < 0 || index >= 64)
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name, "' names no layer 0 to 63"));
    layers = std::max(layers, index + 1);
  }
  if (layers == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": no 'layers.{i}.' tensors: not an EAGLE head"));
  std::vector<int> feature_layers = {-1};
  if (file.Has("fuse.weight") || file.Has("fuse.layers")) {
    ASSIGN_OR_RETURN(const std::vector<int64_t> shape, file.Shape("fuse.layers"));
    if (shape.size() != 1 || shape[0] < 2 || shape[0] > 64)
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor 'fuse.layers' has shape [", absl::StrJoin(shape, ", "),
                                                     "], expected [L], 2 <= L <= 64 (the layers a head fuses)"));
    ASSIGN_OR_RETURN(at::Tensor stored, file.Take("fuse.layers", shape));
    if (stored.scalar_type() != at::kLong)
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor 'fuse.layers' holds ", stored.scalar_type(),
                                                     ", expected int64 layer indices"));
    feature_layers.clear();
    for (int64_t i = 0; i < shape[0]; ++i) feature_layers.push_back(static_cast<int>(stored[i].item<int64_t>()));
  }
  absl::StatusOr<EagleHead> made = NewEagleHead(target, layers, kv_capacity, /*seed=*/0, feature_layers);
  if (!made.ok() && feature_layers.size() > 1)
    return absl::InvalidArgumentError(absl::StrCat(path, ": 'fuse.layers': ", made.status().message()));
  if (!made.ok()) return made.status();
  EagleHead head = *std::move(made);
  file.Expect(absl::StrCat("an EAGLE head of ", layers, " layers", head.fuses() ? ", fusing " : "",
                           head.fuses() ? absl::StrCat(feature_layers.size(), " target layers") : "", " for this target"));
  auto take = [&](const std::string& name, at::Tensor& into) -> absl::Status {
    ASSIGN_OR_RETURN(at::Tensor stored, file.Take(name, into.sizes().vec()));
    c10::NoGradGuard no_grad;
    into.copy_(stored);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(take("fc.weight", head.fc_weight));
  RETURN_IF_ERROR(take("fc.bias", head.fc_bias));
  if (head.fuses()) RETURN_IF_ERROR(take("fuse.weight", head.fuse_weight));
  for (auto& [name, tensor] : head.body->NamedParameters())
    if (std::string file_name = FileName(name); !file_name.empty()) RETURN_IF_ERROR(take(file_name, tensor));
  RETURN_IF_ERROR(file.Finish("attention biases or another architecture?"));
  return head;
}

absl::Status SaveEagleHead(const std::string& path, const EagleHead& head, at::ScalarType dtype) {
  std::map<std::string, at::Tensor> tensors = head.Tensors();
  for (auto& [name, tensor] : tensors)
    if (at::isFloatingType(tensor.scalar_type())) tensor = tensor.to(dtype);  // not fuse.layers
  return WriteSafetensors(path, tensors);
}

}  // namespace speclab
