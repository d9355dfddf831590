#include "drafters/eagle/eagle_drafter.h"

#include <ATen/ATen.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"

namespace speclab {

EagleDrafter::EagleDrafter(const LlamaModel& target, EagleHead head) : target_(target), head_(std::move(head)) {}

absl::Status EagleDrafter::CheckFeatures(const TargetFeatures& target, int64_t rows, const char* of_what) const {
  const size_t layers = head_.feature_layers.size();
  bool ok = target.hidden.size() == layers;
  for (size_t i = 0; ok && i < layers; ++i) ok = target.hidden[i].dim() == 2 && target.hidden[i].size(0) == rows;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(name(), ": expected the target's hidden states ",
                                                 absl::StrJoin(head_.feature_layers, ", "), " of ", of_what, " (",
                                                 rows, " rows each)"));
}

absl::Status EagleDrafter::Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) {
  RETURN_IF_ERROR(CheckFeatures(target, static_cast<int64_t>(prompt.size()) - 1, "every prompt token but the last"));
  RETURN_IF_ERROR(head_.body->Truncate(0));
  RETURN_IF_ERROR(head_.body->KeepHiddenStates({-1}));
  pending_ = head_.TargetFeature(target.hidden);
  fed_ = 1;
  root_position_ = -1;
  // The prompt's features are fed now, with the prefill (as the target's
  // prompt is), so that the first step only drafts.
  RETURN_IF_ERROR(BeginStep(prompt));
  root_from_reset_ = true;
  return absl::OkStatus();
}

absl::Status EagleDrafter::BeginStep(absl::Span<const int32_t> context) {
  LlamaModel& body = *head_.body;
  RETURN_IF_ERROR(body.Truncate(body.committed_length()));  // the last step's drafted entries
  const int64_t m = pending_.defined() ? pending_.size(0) : 0;
  if (fed_ + m != static_cast<int64_t>(context.size()))
    return absl::FailedPreconditionError(absl::StrCat(name(), ": the context has ", context.size(), " tokens; the head fed ",
                                                      fed_, " and holds features for ", m, " more"));
  // A step begun again at the same root (the first after Reset, or a
  // pipelined tree refused after its first step) keeps the root's readout.
  const bool again = m == 0 && root_position_ == static_cast<int64_t>(context.size()) - 1;
  node_hidden_.resize(1);
  node_logits_.resize(1);
  if (!again) node_hidden_[0] = node_logits_[0] = at::Tensor();
  slot_node_.clear();
  drafted_on_device_ = false;
  root_from_reset_ = false;
  root_position_ = static_cast<int64_t>(context.size()) - 1;
  root_ = context.back();
  if (m == 0) return absl::OkStatus();  // again, or a one-token prompt's
  const c10::Device device = target_.device();
  const std::vector<int64_t> tokens(context.end() - m, context.end());
  const at::Tensor inputs = head_.Fuse(at::tensor(tokens, at::kLong).to(device), pending_);
  ASSIGN_OR_RETURN(at::Tensor logits,
                   body.ForwardEmbedded(inputs, at::arange(fed_, fed_ + m, at::kLong).to(device), at::Tensor()));
  ASSIGN_OR_RETURN(at::Tensor hidden, body.HiddenStates(-1));
  std::vector<int64_t> slots(m);
  for (int64_t i = 0; i < m; ++i) slots[i] = i;
  RETURN_IF_ERROR(body.Commit(slots));
  node_hidden_[0] = hidden.narrow(0, m - 1, 1);
  node_logits_[0] = logits.narrow(0, m - 1, 1);
  fed_ += m;
  pending_ = at::Tensor();
  return absl::OkStatus();
}

absl::Status EagleDrafter::FeedNodes(const TokenTree& tree, const std::vector<int>& nodes, const at::Tensor& tokens) {
  LlamaModel& body = *head_.body;
  const int64_t k = static_cast<int64_t>(nodes.size()), fed = static_cast<int64_t>(slot_node_.size());
  std::vector<at::Tensor> parents;
  std::vector<int64_t> positions;
  // Each node attends to its ancestors' tentative entries and its own.
  at::Tensor mask = at::zeros({k, fed + k}, at::kBool);
  auto allowed = mask.accessor<bool, 2>();
  for (int64_t i = 0; i < k; ++i) {
    const int node = nodes[i];
    parents.push_back(node_hidden_[tree.parent(node)]);
    positions.push_back(root_position_ + tree.depth(node));
    for (int64_t slot = 0; slot < fed; ++slot) allowed[i][slot] = tree.IsAncestorOrSelf(slot_node_[slot], node);
    allowed[i][fed + i] = true;
  }
  const c10::Device device = target_.device();
  const at::Tensor inputs = head_.Fuse(tokens, at::cat(parents));
  ASSIGN_OR_RETURN(at::Tensor logits, body.ForwardEmbedded(inputs, at::tensor(positions, at::kLong).to(device),
                                                           mask.to(device)));
  ASSIGN_OR_RETURN(at::Tensor hidden, body.HiddenStates(-1));
  for (int64_t i = 0; i < k; ++i) {
    node_hidden_[nodes[i]] = hidden.narrow(0, i, 1);
    node_logits_[nodes[i]] = logits.narrow(0, i, 1);
    slot_node_.push_back(nodes[i]);
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> EagleDrafter::NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                                         const at::Tensor& node_tokens) {
  const c10::Device device = target_.device();
  for (int node : nodes)
    if (node < 0 || node >= tree.size()) return absl::InvalidArgumentError(absl::StrCat(name(), ": no node ", node));
  if (drafted_on_device_)
    for (int node : nodes)
      if (node != 0)
        return absl::FailedPreconditionError(absl::StrCat(
            name(), ": node ", node, " of a step drafted on the device (DraftChain, DraftLevels); BeginStep starts anew"));
  if (!node_logits_[0].defined())
    return at::zeros({static_cast<int64_t>(nodes.size()), target_.config().vocab_size},
                     at::TensorOptions().dtype(at::kFloat).device(device));
  if (static_cast<int>(node_hidden_.size()) < tree.size()) {
    node_hidden_.resize(tree.size());
    node_logits_.resize(tree.size());
  }
  // The listed nodes not fed yet, fed in waves whose parents are fed.
  std::vector<int> waiting;      // nodes
  std::vector<int64_t> listed;   // their index in `nodes`
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!node_hidden_[nodes[i]].defined()) {
      waiting.push_back(nodes[i]);
      listed.push_back(static_cast<int64_t>(i));
    }
  }
  while (!waiting.empty()) {
    std::vector<int> wave, rest;
    std::vector<int64_t> wave_listed, rest_listed;
    for (size_t i = 0; i < waiting.size(); ++i) {
      const bool ready = node_hidden_[tree.parent(waiting[i])].defined();
      (ready ? wave : rest).push_back(waiting[i]);
      (ready ? wave_listed : rest_listed).push_back(listed[i]);
    }
    if (wave.empty())
      return absl::FailedPreconditionError(absl::StrCat(name(), ": node ", rest[0], "'s parent ",
                                                        tree.parent(rest[0]), " was never listed this step"));
    at::Tensor tokens;
    if (node_tokens.defined()) {
      tokens = node_tokens.index_select(0, at::tensor(wave_listed, at::kLong).to(node_tokens.device()));
    } else {
      std::vector<int64_t> ids;
      for (int node : wave) ids.push_back(tree.token(node));
      tokens = at::tensor(ids, at::kLong).to(device);
    }
    RETURN_IF_ERROR(FeedNodes(tree, wave, tokens));
    waiting = std::move(rest);
    listed = std::move(rest_listed);
  }
  std::vector<at::Tensor> rows;
  for (int node : nodes) rows.push_back(node_logits_[node]);
  return at::cat(rows);
}

absl::Status EagleDrafter::EndStep(const TokenTree&, absl::Span<const int> accepted_path,
                                   const TargetFeatures& target) {
  RETURN_IF_ERROR(CheckFeatures(target, static_cast<int64_t>(accepted_path.size()), "each accepted node"));
  pending_ = head_.TargetFeature(target.hidden);
  return absl::OkStatus();
}

namespace {

const bool kRegistered = DrafterRegistry::Add({
    .name = "eagle",
    .description = "EAGLE's feature-level draft head on the target's hidden states (Li et al. 2024); gives q rows",
    .lossless = "-",
    .create = [](Options& options, const DrafterEnvironment& env) -> absl::StatusOr<std::unique_ptr<Drafter>> {
      const auto* target = dynamic_cast<const LlamaModel*>(env.target);
      if (target == nullptr) return options.Error("type", "eagle reads a LlamaModel target's hidden states");
      ASSIGN_OR_RETURN(std::string path, options.GetString("path", ""));
      ASSIGN_OR_RETURN(int64_t layers, options.GetIntIn("layers", 1, 1, 64));
      if (!path.empty() && options.Has("layers"))
        return options.Error("layers", "sets an untrained head's depth; a checkpoint (path) has its own");
      absl::StatusOr<EagleHead> head =
          path.empty() ? NewEagleHead(*target, layers, env.kv_capacity, env.seed)
                       : LoadEagleHead(options.ResolvePath(path), *target, env.kv_capacity);
      if (!head.ok()) return options.Error(path.empty() ? "layers" : "path", std::string(head.status().message()));
      if (head->fuses()) return options.Error("path", "holds an EAGLE-3 head (it fuses several layers): type eagle3");
      return std::unique_ptr<Drafter>(std::make_unique<EagleDrafter>(*target, *std::move(head)));
    },
});

}  // namespace
}  // namespace speclab
