#include "drafters/hydra/hydra_drafter.h"

#include <ATen/ATen.h>

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/model/safetensors.h"

namespace speclab {

HydraHead InitialHydraHead(const LlamaModel& target, int k, int layers) {
  const int64_t hidden = target.config().hidden_size, inputs = (k + 2) * hidden;
  const at::TensorOptions options = target.parameter_options();
  HydraHead head{.in_weight = at::zeros({hidden, inputs}, options), .in_bias = at::zeros({hidden}, options),
                 .res_weight = at::zeros({hidden, inputs}, options), .res_bias = at::zeros({hidden}, options)};
  head.res_weight.narrow(1, 0, hidden).copy_(at::eye(hidden, options));  // y = h: Medusa's initial head
  for (int l = 1; l < layers; ++l) {
    head.weights.push_back(at::zeros({hidden, hidden}, options));
    head.biases.push_back(at::zeros({hidden}, options));
  }
  return head;
}

absl::StatusOr<std::vector<HydraHead>> LoadHydraHeads(const std::string& path, int heads, int layers,
                                                      const LlamaModel& target) {
  ASSIGN_OR_RETURN(CheckpointTensors file,
                   CheckpointTensors::Read(path, absl::StrCat(heads, " heads of ", layers, " ResBlocks")));
  const int64_t hidden = target.config().hidden_size, vocab = target.config().vocab_size;
  auto take = [&](const std::string& name, std::vector<int64_t> shape) {
    return file.Take(name, shape, target.parameter_options());
  };
  const bool own_lm_heads = file.Has("hydra_lm_head.0.weight");
  std::vector<HydraHead> out(heads);
  for (int k = 0; k < heads; ++k) {
    const std::string block = absl::StrCat("hydra_mlp.", k, ".");
    const int64_t inputs = (k + 2) * hidden;
    HydraHead& head = out[k];
    ASSIGN_OR_RETURN(head.in_weight, take(block + "0.linear.weight", {hidden, inputs}));
    ASSIGN_OR_RETURN(head.in_bias, take(block + "0.linear.bias", {hidden}));
    ASSIGN_OR_RETURN(head.res_weight, take(block + "0.res_connection.weight", {hidden, inputs}));
    ASSIGN_OR_RETURN(head.res_bias, take(block + "0.res_connection.bias", {hidden}));
    for (int l = 1; l < layers; ++l) {
      ASSIGN_OR_RETURN(at::Tensor a, take(absl::StrCat(block, l, ".linear.weight"), {hidden, hidden}));
      ASSIGN_OR_RETURN(at::Tensor b, take(absl::StrCat(block, l, ".linear.bias"), {hidden}));
      head.weights.push_back(std::move(a));
      head.biases.push_back(std::move(b));
    }
    if (own_lm_heads) {
      ASSIGN_OR_RETURN(head.lm_head, take(absl::StrCat("hydra_lm_head.", k, ".weight"), {vocab, hidden}));
      const std::string bias = absl::StrCat("hydra_lm_head.", k, ".bias");
      if (file.Has(bias)) {
        ASSIGN_OR_RETURN(head.lm_bias, take(bias, {vocab}));
      }
    }
  }
  RETURN_IF_ERROR(file.Finish("check heads and layers"));
  return out;
}

absl::Status SaveHydraHeads(const std::string& path, const std::vector<HydraHead>& heads, at::ScalarType dtype) {
  std::map<std::string, at::Tensor> tensors;
  auto put = [&](const std::string& name, const at::Tensor& t) { tensors[name] = t.detach().to(at::kCPU, dtype); };
  for (size_t k = 0; k < heads.size(); ++k) {
    const HydraHead& head = heads[k];
    const std::string block = absl::StrCat("hydra_mlp.", k, ".");
    put(block + "0.linear.weight", head.in_weight);
    put(block + "0.linear.bias", head.in_bias);
    put(block + "0.res_connection.weight", head.res_weight);
    put(block + "0.res_connection.bias", head.res_bias);
    for (size_t l = 0; l < head.weights.size(); ++l) {
      put(absl::StrCat(block, l + 1, ".linear.weight"), head.weights[l]);
      put(absl::StrCat(block, l + 1, ".linear.bias"), head.biases[l]);
    }
    if (head.lm_head.defined()) put(absl::StrCat("hydra_lm_head.", k, ".weight"), head.lm_head);
    if (head.lm_bias.defined()) put(absl::StrCat("hydra_lm_head.", k, ".bias"), head.lm_bias);
  }
  return WriteSafetensors(path, tensors);
}

at::Tensor HydraHeadLogits(const HydraHead& head, const LlamaModel& target, const at::Tensor& inputs) {
  at::Tensor y = at::linear(inputs, head.res_weight, head.res_bias) +
                 at::silu(at::linear(inputs, head.in_weight, head.in_bias));
  for (size_t l = 0; l < head.weights.size(); ++l) y = y + at::silu(at::linear(y, head.weights[l], head.biases[l]));
  if (!head.lm_head.defined()) return target.LmHead(y);
  return (head.lm_bias.defined() ? at::linear(y, head.lm_head, head.lm_bias) : at::linear(y, head.lm_head))
      .to(at::kFloat);
}

HydraDrafter::HydraDrafter(const LlamaModel& target, std::vector<HydraHead> heads)
    : target_(target), heads_(std::move(heads)) {}

at::Tensor HydraDrafter::HeadLogits(int k, const at::Tensor& state, const at::Tensor& path_tokens) const {
  const int64_t n = path_tokens.size(0);
  const at::Tensor embedded = target_.Embed(path_tokens.reshape({-1})).reshape({n, -1});
  return HydraHeadLogits(heads_[k], target_, at::cat({state.expand({n, state.size(1)}), embedded}, 1));
}

absl::Status HydraDrafter::Reset(absl::Span<const int32_t>, const TargetFeatures& target) {
  return state_.FromPrefill(target);
}

absl::Status HydraDrafter::BeginStep(absl::Span<const int32_t> context) {
  root_ = context.empty() ? -1 : context.back();
  step_tokens_.clear();
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> HydraDrafter::NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                                         const at::Tensor& node_tokens) {
  const int heads = static_cast<int>(heads_.size());
  const c10::Device device = target_.device();
  if (node_tokens.defined() && node_tokens.size(0) != static_cast<int64_t>(nodes.size()))
    return absl::InvalidArgumentError(absl::StrCat("hydra: ", node_tokens.size(0), " node tokens for ", nodes.size(),
                                                   " nodes"));
  // The listed nodes' tokens first (the tree's may be placeholders), then
  // the nodes by depth, each with its path's tokens, root first.
  for (size_t row = 0; row < nodes.size(); ++row) {
    const int node = nodes[row];
    if (node < 0 || node >= tree.size()) return absl::InvalidArgumentError(absl::StrCat("hydra: no node ", node));
    if (static_cast<int>(step_tokens_.size()) < tree.size()) step_tokens_.resize(tree.size());
    step_tokens_[node] = node_tokens.defined()
                             ? node_tokens.narrow(0, static_cast<int64_t>(row), 1).to(at::kLong)
                             : at::full({1}, tree.token(node), at::TensorOptions().dtype(at::kLong).device(device));
  }
  std::map<int, std::pair<std::vector<int64_t>, std::vector<at::Tensor>>> by_depth;  // depth -> (rows, paths)
  for (size_t row = 0; row < nodes.size(); ++row) {
    const int node = nodes[row], depth = tree.depth(node);
    if (depth >= heads)
      return absl::FailedPreconditionError(absl::StrCat(
          "hydra: a node at depth ", depth, " asks for head ", depth, ", but there are ", heads,
          " (heads draft at most ", heads, " tokens below the root: lower the tree's depth)"));
    std::vector<at::Tensor> path(depth + 1);
    for (int at = node, i = depth; at >= 0; at = tree.parent(at), --i) {
      if (!step_tokens_[at].defined())
        return absl::InvalidArgumentError(absl::StrCat("hydra: node ", node, "'s ancestor ", at,
                                                       " was not listed before it this step"));
      path[i] = step_tokens_[at];
    }
    auto& [rows, paths] = by_depth[depth];
    rows.push_back(static_cast<int64_t>(row));
    paths.push_back(at::cat(path));
  }
  at::Tensor out = at::zeros({static_cast<int64_t>(nodes.size()), target_.config().vocab_size},
                             at::TensorOptions().dtype(at::kFloat).device(device));
  if (!state_.row().defined()) return out;
  for (const auto& [depth, group] : by_depth) {
    const auto& [rows, paths] = group;
    out.index_copy_(0, at::tensor(rows, at::kLong).to(device), HeadLogits(depth, state_.row(), at::stack(paths)));
  }
  return out;
}

absl::Status HydraDrafter::EndStep(const TokenTree&, absl::Span<const int> accepted_path,
                                   const TargetFeatures& target) {
  return state_.FromPath(target, accepted_path.size());
}

namespace {

const bool kRegistered = DrafterRegistry::Add({
    .name = "hydra",
    .description = "Hydra's sequentially dependent heads on the target's last hidden state and the drafted "
                   "tokens (Ankner et al. 2024); gives q rows",
    .lossless = "-",
    .create = [](Options& options, const DrafterEnvironment& env) -> absl::StatusOr<std::unique_ptr<Drafter>> {
      const auto* target = dynamic_cast<const LlamaModel*>(env.target);
      if (target == nullptr) return options.Error("type", "hydra reads a LlamaModel target's hidden states");
      ASSIGN_OR_RETURN(int64_t heads, options.GetInt("heads"));
      ASSIGN_OR_RETURN(int64_t layers, options.GetInt("layers", 1));
      ASSIGN_OR_RETURN(std::string path, options.GetString("path", ""));
      if (heads < 1 || heads > 16) return options.Error("heads", "expected an integer in [1, 16]");
      if (layers < 1 || layers > 16) return options.Error("layers", "expected an integer in [1, 16]");
      std::vector<HydraHead> loaded;
      if (path.empty()) {
        for (int k = 0; k < heads; ++k) loaded.push_back(InitialHydraHead(*target, k, static_cast<int>(layers)));
      } else {
        auto read = LoadHydraHeads(options.ResolvePath(path), static_cast<int>(heads), static_cast<int>(layers),
                                   *target);
        if (!read.ok()) return options.Error("path", std::string(read.status().message()));
        loaded = *std::move(read);
      }
      return std::unique_ptr<Drafter>(std::make_unique<HydraDrafter>(*target, std::move(loaded)));
    },
});

}  // namespace
}  // namespace speclab
