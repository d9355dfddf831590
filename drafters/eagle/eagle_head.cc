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

NodeInputs EagleHead::Inputs() const { return NodeInputs::Of(&FuseEmbedded, std::make_tuple(fc_weight, fc_bias)); }

std::map<std::string, at::Tensor> EagleHead::Tensors() const {
  std::map<std::string, at::Tensor> out{{"fc.weight", fc_weight.detach().cpu()}, {"fc.bias", fc_bias.detach().cpu()}};
  for (const auto& [name, tensor] : body->NamedParameters())
    if (std::string file = FileName(name); !file.empty()) out[file] = tensor.detach().cpu();
  return out;
}

absl::StatusOr<EagleHead> NewEagleHead(const LlamaModel& target, int64_t layers, int64_t kv_capacity,
                                       uint64_t seed) {
  EagleHead head;
  ASSIGN_OR_RETURN(head.body, LlamaModel::WithNewLayers(target, layers, kv_capacity, seed));
  const int64_t hidden = target.config().hidden_size;
  c10::InferenceMode normal_tensors(false);
  c10::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed + 1);
  head.fc_weight = at::empty({hidden, 2 * hidden}, at::kFloat).normal_(0.0, 0.02, gen).to(target.parameter_options());
  head.fc_bias = at::zeros({hidden}, target.parameter_options());
  return head;
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
  ASSIGN_OR_RETURN(EagleHead head, NewEagleHead(target, layers, kv_capacity, /*seed=*/0));
  file.Expect(absl::StrCat("an EAGLE head of ", layers, " layers for this target"));
  auto take = [&](const std::string& name, at::Tensor& into) -> absl::Status {
    ASSIGN_OR_RETURN(at::Tensor stored, file.Take(name, into.sizes().vec()));
    c10::NoGradGuard no_grad;
    into.copy_(stored);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(take("fc.weight", head.fc_weight));
  RETURN_IF_ERROR(take("fc.bias", head.fc_bias));
  for (auto& [name, tensor] : head.body->NamedParameters())
    if (std::string file_name = FileName(name); !file_name.empty()) RETURN_IF_ERROR(take(file_name, tensor));
  RETURN_IF_ERROR(file.Finish("attention biases or another architecture?"));
  return head;
}

absl::Status SaveEagleHead(const std::string& path, const EagleHead& head, at::ScalarType dtype) {
  std::map<std::string, at::Tensor> tensors = head.Tensors();
  for (auto& [name, tensor] : tensors) tensor = tensor.to(dtype);
  return WriteSafetensors(path, tensors);
}

}  // namespace speclab
