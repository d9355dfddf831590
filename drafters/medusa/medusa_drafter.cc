#include "drafters/medusa/medusa_drafter.h"

#include <ATen/ATen.h>

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/model/safetensors.h"

namespace speclab {

absl::StatusOr<std::vector<MedusaHead>> LoadMedusaHeads(const std::string& path, int heads, int layers,
                                                        const LlamaModel& target) {
  ASSIGN_OR_RETURN(CheckpointTensors file,
                   CheckpointTensors::Read(path, absl::StrCat(heads, " heads of ", layers, " ResBlocks")));
  const int64_t hidden = target.config().hidden_size, vocab = target.config().vocab_size;
  auto take = [&](const std::string& name, std::vector<int64_t> shape) {
    return file.Take(name, shape, target.parameter_options());
  };
  // Every head has its own LM head, or none does (the target's).
  const bool own_lm_heads = file.Has(absl::StrCat(0, ".", layers, ".weight"));
  std::vector<MedusaHead> out(heads);
  for (int k = 0; k < heads; ++k) {
    for (int l = 0; l < layers; ++l) {
      ASSIGN_OR_RETURN(at::Tensor a, take(absl::StrCat(k, ".", l, ".linear.weight"), {hidden, hidden}));
      ASSIGN_OR_RETURN(at::Tensor b, take(absl::StrCat(k, ".", l, ".linear.bias"), {hidden}));
      out[k].weights.push_back(std::move(a));
      out[k].biases.push_back(std::move(b));
    }
    if (own_lm_heads) {
      ASSIGN_OR_RETURN(out[k].lm_head, take(absl::StrCat(k, ".", layers, ".weight"), {vocab, hidden}));
    }
  }
  RETURN_IF_ERROR(file.Finish("check heads and layers"));
  return out;
}

absl::Status SaveMedusaHeads(const std::string& path, const std::vector<MedusaHead>& heads, at::ScalarType dtype) {
  std::map<std::string, at::Tensor> tensors;
  for (size_t k = 0; k < heads.size(); ++k) {
    const MedusaHead& head = heads[k];
    for (size_t l = 0; l < head.weights.size(); ++l) {
      tensors[absl::StrCat(k, ".", l, ".linear.weight")] = head.weights[l].detach().to(at::kCPU, dtype);
      tensors[absl::StrCat(k, ".", l, ".linear.bias")] = head.biases[l].detach().to(at::kCPU, dtype);
    }
    if (head.lm_head.defined())
      tensors[absl::StrCat(k, ".", head.weights.size(), ".weight")] = head.lm_head.detach().to(at::kCPU, dtype);
  }
  return WriteSafetensors(path, tensors);
}

at::Tensor MedusaHeadLogits(const MedusaHead& head, const LlamaModel& target, const at::Tensor& hidden) {
  at::Tensor x = hidden;
  for (size_t l = 0; l < head.weights.size(); ++l) x = x + at::silu(at::linear(x, head.weights[l], head.biases[l]));
  return head.lm_head.defined() ? at::linear(x, head.lm_head).to(at::kFloat) : target.LmHead(x);
}

MedusaDrafter::MedusaDrafter(const LlamaModel& target, std::vector<MedusaHead> heads)
    : target_(target), heads_(std::move(heads)) {}

at::Tensor MedusaDrafter::HeadLogits(const at::Tensor& hidden) const {
  std::vector<at::Tensor> rows;
  for (const MedusaHead& head : heads_) rows.push_back(MedusaHeadLogits(head, target_, hidden));
  return at::cat(rows);
}

absl::Status MedusaDrafter::Reset(absl::Span<const int32_t>, const TargetFeatures& target) {
  return state_.FromPrefill(target);
}

absl::Status MedusaDrafter::BeginStep(absl::Span<const int32_t> context) {
  step_logits_ = at::Tensor();
  root_ = context.empty() ? -1 : context.back();
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> MedusaDrafter::NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                                          const at::Tensor&) {
  const int64_t heads = static_cast<int64_t>(heads_.size());
  std::vector<int64_t> depths;
  for (int node : nodes) {
    if (node < 0 || node >= tree.size()) return absl::InvalidArgumentError(absl::StrCat("medusa: no node ", node));
    if (tree.depth(node) >= heads)
      return absl::FailedPreconditionError(absl::StrCat(
          "medusa: a node at depth ", tree.depth(node), " asks for head ", tree.depth(node), ", but there are ",
          heads, " (heads draft at most ", heads, " tokens below the root: lower the tree's depth)"));
    depths.push_back(tree.depth(node));
  }
  const c10::Device device = target_.device();
  if (!state_.row().defined())
    return at::zeros({static_cast<int64_t>(nodes.size()), target_.config().vocab_size},
                     at::TensorOptions().dtype(at::kFloat).device(device));
  if (!step_logits_.defined()) step_logits_ = HeadLogits(state_.row());
  return step_logits_.index_select(0, at::tensor(depths, at::kLong).to(device));
}

absl::Status MedusaDrafter::EndStep(const TokenTree&, absl::Span<const int> accepted_path,
                                    const TargetFeatures& target) {
  return state_.FromPath(target, accepted_path.size());
}

namespace {

const bool kRegistered = DrafterRegistry::Add({
    .name = "medusa",
    .description = "Medusa-1 heads on the target's last hidden state (Cai et al. 2024); gives q rows",
    .lossless = "-",
    .create = [](Options& options, const DrafterEnvironment& env) -> absl::StatusOr<std::unique_ptr<Drafter>> {
      const auto* target = dynamic_cast<const LlamaModel*>(env.target);
      if (target == nullptr) return options.Error("type", "medusa reads a LlamaModel target's hidden states");
      ASSIGN_OR_RETURN(int64_t heads, options.GetInt("heads"));
      ASSIGN_OR_RETURN(int64_t layers, options.GetInt("layers", 1));
      ASSIGN_OR_RETURN(std::string path, options.GetString("path", ""));
      if (heads < 1 || heads > 64) return options.Error("heads", "expected an integer in [1, 64]");
      if (layers < 0 || layers > 16) return options.Error("layers", "expected an integer in [0, 16]");
      std::vector<MedusaHead> loaded(heads);  // Medusa's initialisation
      if (!path.empty()) {
        auto read = LoadMedusaHeads(options.ResolvePath(path), static_cast<int>(heads), static_cast<int>(layers),
                                    *target);
        if (!read.ok()) return options.Error("path", std::string(read.status().message()));
        loaded = *std::move(read);
      }
      return std::unique_ptr<Drafter>(std::make_unique<MedusaDrafter>(*target, std::move(loaded)));
    },
});

}  // namespace
}  // namespace speclab
