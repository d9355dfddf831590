#include "drafters/model/model_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/model/llama_model.h"

namespace speclab {

ModelDrafter::ModelDrafter(std::unique_ptr<LanguageModel> model, std::optional<VocabularyMap> vocab_map)
    : model_(std::move(model)), device_model_(DeviceFormOf(*model_)), vocab_map_(std::move(vocab_map)) {
  if (!vocab_map_) return;
  // Target tokens the drafter lacks are fed to it as its unknown token.
  target_to_draft_.assign(vocab_map_->target_vocab, vocab_map_->unknown_draft_token);
  std::vector<int64_t> mapped_draft, mapped_target;
  for (size_t d = 0; d < vocab_map_->draft_to_target.size(); ++d) {
    const int64_t t = vocab_map_->draft_to_target[d];
    if (t < 0) continue;
    target_to_draft_[t] = static_cast<int64_t>(d);
    mapped_draft.push_back(static_cast<int64_t>(d));
    mapped_target.push_back(t);
  }
  const c10::Device device = model_->device();
  target_to_draft_device_ = LongsToDevice(target_to_draft_, device);
  mapped_draft_ids_device_ = LongsToDevice(mapped_draft, device);
  draft_to_target_device_ = LongsToDevice(mapped_target, device);
}

int64_t ModelDrafter::ToDraftToken(int64_t target_token) const {
  return vocab_map_ ? target_to_draft_[target_token] : target_token;
}

namespace {

// Draft logits [n, draft vocab] as target logits [n, target_vocab]: target
// tokens the drafter cannot propose get -inf, probability 0 in q.
at::Tensor MapToTargetLogits(const at::Tensor& draft_logits, int64_t target_vocab, const at::Tensor& draft_to_target,
                             const at::Tensor& mapped_draft_ids) {
  at::Tensor out = at::full({draft_logits.size(0), target_vocab}, -std::numeric_limits<float>::infinity(),
                            draft_logits.options());
  return out.index_copy_(1, draft_to_target, draft_logits.index_select(1, mapped_draft_ids));
}

}  // namespace

at::Tensor ModelDrafter::ToTargetLogits(const at::Tensor& draft_logits) const {
  if (!vocab_map_) return draft_logits;
  return MapToTargetLogits(draft_logits, vocab_map_->target_vocab, draft_to_target_device_, mapped_draft_ids_device_);
}

absl::Status ModelDrafter::FeedContext(absl::Span<const int32_t> tokens, int64_t first_position) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<int64_t> ids(n), positions(n);
  for (int64_t i = 0; i < n; ++i) {
    ids[i] = ToDraftToken(tokens[i]);
    positions[i] = first_position + i;
  }
  const c10::Device device = model_->device();
  return model_->Forward(LongsToDevice(ids, device), LongsToDevice(positions, device), at::Tensor()).status();
}

absl::Status ModelDrafter::Reset(absl::Span<const int32_t> prompt, const TargetFeatures&) {
  RETURN_IF_ERROR(model_->Truncate(0));
  cached_.clear();
  cache_on_device_only_ = false;
  // Prefill now, as the engine prefills the target: the prompt but its last
  // token (the first root). Left to the first step, this forward would be
  // timed as drafting (and a new prompt length can cost milliseconds of
  // attention-kernel planning on CUDA).
  const int64_t n = static_cast<int64_t>(prompt.size()) - 1;
  if (n <= 0) return absl::OkStatus();
  RETURN_IF_ERROR(FeedContext(prompt.first(n), 0));
  std::vector<int64_t> slots(n);
  for (int64_t i = 0; i < n; ++i) slots[i] = i;
  RETURN_IF_ERROR(model_->Commit(slots));
  cached_.assign(prompt.begin(), prompt.end() - 1);
  return absl::OkStatus();
}

absl::Status ModelDrafter::BeginStep(absl::Span<const int32_t> context) {
  if (context.empty()) return absl::InvalidArgumentError("empty context");
  context_.assign(context.begin(), context.end());
  if (cache_on_device_only_) {  // after pipelined chains: start over
    RETURN_IF_ERROR(model_->Truncate(0));
    cached_.clear();
    cache_on_device_only_ = false;
  }
  // Keep the longest cached prefix that still agrees with the context (the
  // root itself is fed as tree node 0, so it never counts as cached).
  const size_t limit = std::min(cached_.size(), context_.size() - 1);
  size_t common = 0;
  while (common < limit && cached_[common] == context_[common]) ++common;
  if (common < cached_.size() || model_->tentative_length() > 0) {
    RETURN_IF_ERROR(model_->Truncate(static_cast<int64_t>(common)));
    cached_.resize(common);
  }
  pending_.assign(context_.begin() + common, context_.end() - 1);
  pending_slots_ = 0;
  node_slot_.clear();
  node_logits_.clear();
  node_hidden_.clear();
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> ModelDrafter::NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                                         const at::Tensor& node_tokens) {
  const c10::Device device = model_->device();
  node_slot_.resize(tree.size(), -1);
  node_logits_.resize(tree.size());
  node_hidden_.resize(tree.size());
  // New inputs: the pending context (first call of the step only), then every
  // listed node not fed yet, in index order so parents precede children.
  std::vector<int> fresh;
  std::vector<int64_t> fresh_rows;  // row of node_tokens for each fresh node, or -1
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int node = nodes[i];
    if (node < 0 || node >= tree.size())
      return absl::InvalidArgumentError(absl::StrCat("node ", node, " is not in the tree"));
    if (node_slot_[node] < 0 && std::find(fresh.begin(), fresh.end(), node) == fresh.end()) {
      fresh.push_back(node);
      fresh_rows.push_back(static_cast<int64_t>(i));
    }
  }
  std::vector<size_t> order(fresh.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return fresh[a] < fresh[b]; });

  const int64_t pending = static_cast<int64_t>(pending_.size()) - pending_slots_;
  const int64_t n = pending + static_cast<int64_t>(fresh.size());
  if (n > 0) {
    const int64_t tentative = model_->tentative_length();
    const int64_t root_position = static_cast<int64_t>(context_.size()) - 1;
    std::vector<int64_t> host_tokens(n), positions(n);
    std::vector<uint8_t> mask(static_cast<size_t>(n) * (tentative + n), 0);
    auto allow = [&](int64_t row, int64_t slot) { mask[static_cast<size_t>(row) * (tentative + n) + slot] = 1; };
    for (int64_t i = 0; i < pending; ++i) {
      host_tokens[i] = ToDraftToken(pending_[pending_slots_ + i]);
      positions[i] = root_position - pending + i;
      for (int64_t s = 0; s < tentative + i + 1; ++s) allow(i, s);  // causal over earlier pending slots
    }
    // Rows of the device token tensor to splice in, for nodes given on the device.
    std::vector<int64_t> device_rows, device_dest;
    for (size_t k = 0; k < order.size(); ++k) {
      const int node = fresh[order[k]];
      const int64_t row = pending + static_cast<int64_t>(k);
      host_tokens[row] = ToDraftToken(std::max<int32_t>(tree.token(node), 0));
      if (node_tokens.defined()) {
        device_rows.push_back(fresh_rows[order[k]]);
        device_dest.push_back(row);
      }
      positions[row] = root_position + tree.depth(node);
      // All pending context: earlier calls' pending slots come first in the
      // tentative region, and this call's pending rows come first in it when
      // the region was empty (pending is only ever fed by the step's first call).
      for (int64_t s = 0; s < pending_slots_ + pending; ++s) allow(row, s);
      for (int anc : tree.PathTo(node)) {
        if (anc == node) {
          allow(row, tentative + row);
        } else {
          const int64_t slot = node_slot_[anc] >= 0 ? node_slot_[anc] : -1;
          int64_t same_call = -1;
          for (size_t j = 0; j < k; ++j)
            if (fresh[order[j]] == anc) same_call = tentative + pending + static_cast<int64_t>(j);
          if (slot < 0 && same_call < 0)
            return absl::FailedPreconditionError(
                absl::StrCat("node ", node, " asked for before its ancestor ", anc));
          allow(row, slot >= 0 ? slot : same_call);
        }
      }
    }
    // Each upload costs host time (pinned staging, a copy, an event) that a
    // small drafter's forward does not hide, so the common shapes skip them:
    // device tokens handed over exactly in feeding order, and the all-visible
    // mask of a chain.
    bool tokens_as_given = node_tokens.defined() && pending == 0 && !vocab_map_ &&
                           node_tokens.size(0) == n && static_cast<int64_t>(device_rows.size()) == n;
    for (size_t k = 0; tokens_as_given && k < device_rows.size(); ++k)
      tokens_as_given = device_rows[k] == static_cast<int64_t>(k) && device_dest[k] == static_cast<int64_t>(k);
    at::Tensor tokens;
    if (tokens_as_given) {
      tokens = node_tokens.to(at::kLong);
    } else {
      tokens = LongsToDevice(host_tokens, device);
      if (!device_rows.empty()) {
        at::Tensor src = node_tokens.to(at::kLong).index_select(0, LongsToDevice(device_rows, device));
        if (vocab_map_) src = target_to_draft_device_.index_select(0, src);
        tokens.index_copy_(0, LongsToDevice(device_dest, device), src);
      }
    }
    const auto on_device = at::TensorOptions().device(device);
    const at::Tensor position_tensor =
        n == 1 ? at::full({1}, positions[0], on_device.dtype(at::kLong)) : LongsToDevice(positions, device);
    // One token seeing every tentative slot is a chain: no mask to upload.
    const bool chain = n == 1 && std::all_of(mask.begin(), mask.end(), [](uint8_t m) { return m != 0; });
    const at::Tensor mask_tensor = chain ? at::Tensor() : MaskToDevice(mask, n, tentative + n, device);
    ASSIGN_OR_RETURN(at::Tensor logits, model_->Forward(tokens, position_tensor, mask_tensor));
    absl::StatusOr<at::Tensor> hidden = model_->HiddenStates(-1);  // a handle, read only if asked for
    pending_slots_ += pending;
    for (size_t k = 0; k < order.size(); ++k) {
      const int node = fresh[order[k]];
      node_slot_[node] = tentative + pending + static_cast<int64_t>(k);
      node_logits_[node] = logits[pending + static_cast<int64_t>(k)];
      node_hidden_[node] = {hidden.ok() ? *hidden : at::Tensor(), pending + static_cast<int64_t>(k)};
    }
  }
  if (nodes.size() == 1) return ToTargetLogits(node_logits_[nodes[0]].unsqueeze(0));
  std::vector<at::Tensor> rows;
  rows.reserve(nodes.size());
  for (int node : nodes) rows.push_back(node_logits_[node]);
  return ToTargetLogits(at::stack(rows));
}

int64_t ModelDrafter::hidden_size() const { return model_->config().hidden_size; }

absl::StatusOr<at::Tensor> ModelDrafter::NodeHiddenStates(absl::Span<const int> nodes) {
  std::vector<at::Tensor> rows;
  for (int node : nodes) {
    if (node < 0 || node >= static_cast<int>(node_hidden_.size()) || !node_hidden_[node].forward.defined())
      return absl::FailedPreconditionError(
          absl::StrCat("node ", node, "'s hidden state: the node was not fed by this step's NextTokenLogits"));
    rows.push_back(node_hidden_[node].forward.narrow(0, node_hidden_[node].row, 1));
  }
  if (rows.empty()) return absl::InvalidArgumentError("NodeHiddenStates: no nodes");
  return (rows.size() == 1 ? rows[0] : at::cat(rows)).to(at::kFloat);
}

absl::StatusOr<LevelPick> ModelDrafter::InDraftVocabulary(const LevelPick& pick) const {
  if (!vocab_map_) return pick;
  // Its noise would span the drafter's vocabulary, not the target's the pick draws in.
  if (pick.noise_generator() != nullptr)
    return absl::UnimplementedError("a drafter with a vocabulary map draws tree levels token by token");
  // The inner pick chooses in the target's vocabulary: its logits are mapped
  // there (target tokens the drafter lacks at -inf) and its tokens back.
  using Params = std::tuple<LevelPick, int64_t, at::Tensor, at::Tensor, at::Tensor>;
  return LevelPick::Of(
      pick.width(),
      [](const Params& p, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) {
        const auto& [inner, target_vocab, draft_to_target, mapped_draft_ids, target_to_draft] = p;
        LevelPick::Choice choice =
            inner(level, MapToTargetLogits(logits, target_vocab, draft_to_target, mapped_draft_ids), carry);
        choice.tokens = target_to_draft.index_select(0, choice.tokens);
        return choice;
      },
      Params{pick, vocab_map_->target_vocab, draft_to_target_device_, mapped_draft_ids_device_,
             target_to_draft_device_});
}

absl::StatusOr<LevelsKept> ModelDrafter::DraftLevels(int levels, const LevelPick& pick) {
  if (device_model_ == nullptr) return absl::UnimplementedError("the drafter's model has no device form");
  if (!node_slot_.empty() || pending_slots_ > 0)
    return absl::FailedPreconditionError("DraftLevels must come right after BeginStep");
  if (levels < 1) return absl::InvalidArgumentError(absl::StrCat("DraftLevels: levels must be >= 1, got ", levels));
  const c10::Device device = model_->device();
  // The prefix: the context the cache lacks, then the root. Its length picks
  // the model's graph, so it is levels + 2 tokens wherever the context
  // allows (one more than a step can accept), re-feeding cached context
  // rather than capturing a graph per length.
  const size_t fixed = std::min<size_t>(context_.size(), static_cast<size_t>(levels) + 2);
  if (pending_.size() + 1 < fixed) {
    const size_t keep = context_.size() - fixed;
    RETURN_IF_ERROR(model_->Truncate(static_cast<int64_t>(keep)));
    cached_.resize(keep);
    pending_.assign(context_.begin() + static_cast<int64_t>(keep), context_.end() - 1);
  }
  std::vector<int64_t> prefix;
  for (int32_t token : pending_) prefix.push_back(ToDraftToken(token));
  prefix.push_back(ToDraftToken(context_.back()));
  const int64_t pending = static_cast<int64_t>(pending_.size());
  const int64_t first_slot = model_->tentative_length();
  const int64_t root_position = static_cast<int64_t>(context_.size()) - 1;
  ASSIGN_OR_RETURN(const LevelPick in_draft_vocabulary, InDraftVocabulary(pick));
  ASSIGN_OR_RETURN(LevelsKept kept, device_model_->ForwardLevels(LongsToDevice(prefix, device), root_position - pending,
                                                          levels, in_draft_vocabulary));
  pending_slots_ = pending;
  node_slot_.assign(1, first_slot + pending);  // the root; the levels' nodes have no index in the step's tree
  node_logits_.assign(1, at::Tensor());
  node_hidden_.assign(1, {});
  return kept;
}

absl::StatusOr<ChainResult> ModelDrafter::DraftChain(int length, const ChainPick& pick) {
  if (device_model_ == nullptr) return absl::UnimplementedError("the drafter's model has no device form");
  if (vocab_map_) return absl::UnimplementedError("a drafter with a vocabulary map drafts token by token");
  if (length < 1) return absl::InvalidArgumentError(absl::StrCat("DraftChain: length must be >= 1, got ", length));
  if (!node_slot_.empty() || pending_slots_ > 0)
    return absl::FailedPreconditionError("DraftChain must come right after BeginStep");
  const c10::Device device = model_->device();
  const int64_t root_position = static_cast<int64_t>(context_.size()) - 1;
  const int64_t pending = static_cast<int64_t>(pending_.size());
  if (pending > 0) {
    // Context the cache lacks (the last draft of a fully accepted step): one
    // causal chain forward before the drafted chain.
    RETURN_IF_ERROR(FeedContext(pending_, root_position - pending));
    pending_slots_ = pending;
  }
  const int64_t first_slot = model_->tentative_length();
  ASSIGN_OR_RETURN(ChainResult chain,
                   device_model_->ForwardChain(at::full({1}, ToDraftToken(context_.back()),
                                                 at::TensorOptions().dtype(at::kLong).device(device)),
                                        root_position, length, pick));
  node_slot_.assign(length + 1, -1);
  node_logits_.assign(length + 1, at::Tensor());
  node_hidden_.assign(length + 1, {});
  for (int i = 0; i < length; ++i) node_slot_[i] = first_slot + i;
  return chain;
}

absl::StatusOr<ChainResult> ModelDrafter::DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick) {
  return ChainAt(root, length, "DraftChainAt", [&](const at::Tensor& prefix, const DevicePosition& at) {
    return device_model_->ForwardChainAt(prefix, at, length, pick);
  });
}

absl::StatusOr<ChainResult> ModelDrafter::DraftChainInRoundsAt(const DeviceRoot& root, int length,
                                                               const ChainPick& pick, const ChainGuess& guess) {
  if (!root.context.defined())
    return absl::UnimplementedError("the drafter's chain in rounds: the step handed over no context on the device");
  return ChainAt(root, length, "DraftChainInRoundsAt", [&](const at::Tensor& prefix, const DevicePosition& at) {
    return device_model_->ForwardChainInRoundsAt(prefix, at, length, pick, guess, root.context);
  });
}

absl::StatusOr<ChainResult> ModelDrafter::ChainAt(const DeviceRoot& root, int length, const char* what,
                                                  ChainForward forward) {
  if (device_model_ == nullptr) return absl::UnimplementedError("the drafter's model has no device form");
  if (vocab_map_) return absl::UnimplementedError("a drafter with a vocabulary map drafts token by token");
  if (length < 1) return absl::InvalidArgumentError(absl::StrCat(what, ": length must be >= 1, got ", length));
  if (!root.last_two.defined() || root.last_two.numel() != 2)
    return absl::InvalidArgumentError(absl::StrCat(what, ": last_two must hold two tokens"));
  if (root.refeed == 0) {
    ASSIGN_OR_RETURN(ChainResult chain, forward(root.last_two, root.position));
    cache_on_device_only_ = true;
    chain.tokens = chain.tokens.narrow(0, 1, length + 1);
    return chain;
  }
  // The refeed tokens before last_two[0] come from the context, then last_two.
  ASSIGN_OR_RETURN(const FedPrefix fed, PrefixFromContext(root, root.refeed));
  ASSIGN_OR_RETURN(ChainResult chain, forward(fed.tokens, fed.at));
  cache_on_device_only_ = true;
  chain.tokens = chain.tokens.narrow(0, root.refeed + 1, length + 1);
  return chain;
}

absl::StatusOr<ModelDrafter::FedPrefix> ModelDrafter::PrefixFromContext(const DeviceRoot& root, int before) {
  const DevicePosition& before_root = root.position;
  if (!root.context.defined() || root.context.dim() != 1 || root.context.size(0) < before_root.max_start + 2)
    return absl::InvalidArgumentError("the drafter's device step: the context must hold every token up to the root");
  if (before_root.min_start < before)
    return absl::UnimplementedError(absl::StrCat("the root may sit before position ", before + 1,
                                                 ", too early for the fixed prefix"));
  if (!prefix_offsets_.defined() || prefix_offsets_.size(0) != before + 2)
    prefix_offsets_ = at::arange(-before, 2, before_root.start.options());
  const at::Tensor positions = prefix_offsets_ + before_root.start;
  at::Tensor tokens = root.context.index_select(0, positions);
  if (vocab_map_) tokens = target_to_draft_device_.index_select(0, tokens);
  return FedPrefix{.tokens = tokens,
                   .at = {.start = positions.narrow(0, 0, 1), .max_start = before_root.max_start - before,
                          .min_start = before_root.min_start - before}};
}

absl::StatusOr<LevelsKept> ModelDrafter::DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick) {
  if (device_model_ == nullptr) return absl::UnimplementedError("the drafter's model has no device form");
  if (levels < 1) return absl::InvalidArgumentError(absl::StrCat("DraftLevelsAt: levels must be >= 1, got ", levels));
  // DraftLevels' one prefix length: the levels + 1 tokens before the root
  // (one more than a step can accept), then the root.
  ASSIGN_OR_RETURN(const FedPrefix fed, PrefixFromContext(root, levels));
  ASSIGN_OR_RETURN(const LevelPick in_draft_vocabulary, InDraftVocabulary(pick));
  ASSIGN_OR_RETURN(LevelsKept kept, device_model_->ForwardLevelsAt(fed.tokens, fed.at, levels, in_draft_vocabulary));
  cache_on_device_only_ = true;
  return kept;
}

absl::Status ModelDrafter::EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                                   const TargetFeatures&) {
  // Keep the fed pending context and the fed prefix of the accepted path.
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < pending_slots_; ++i) keep.push_back(i);
  cached_.insert(cached_.end(), pending_.begin(), pending_.begin() + pending_slots_);
  for (int node : accepted_path) {
    if (node >= static_cast<int>(node_slot_.size()) || node_slot_[node] < 0) break;
    keep.push_back(node_slot_[node]);
    cached_.push_back(tree.token(node));
  }
  return model_->Commit(keep);
}

namespace {

// Reads {d2t: [...], unknown: ID} and checks it: one entry per drafter token,
// target ids in range or -1, no target id used twice.
absl::StatusOr<VocabularyMap> ReadVocabularyMap(const std::string& path, int64_t draft_vocab, int64_t target_vocab) {
  ASSIGN_OR_RETURN(Options file, Options::FromFile(path));
  VocabularyMap map{.target_vocab = target_vocab};
  ASSIGN_OR_RETURN(map.draft_to_target, file.GetIntList("d2t"));
  ASSIGN_OR_RETURN(map.unknown_draft_token, file.GetInt("unknown", 0));
  RETURN_IF_ERROR(file.CheckAllUsed());
  if (static_cast<int64_t>(map.draft_to_target.size()) != draft_vocab)
    return file.Error("d2t", absl::StrCat("has ", map.draft_to_target.size(), " entries; the drafter has ",
                                          draft_vocab, " tokens"));
  if (map.unknown_draft_token < 0 || map.unknown_draft_token >= draft_vocab)
    return file.Error("unknown", absl::StrCat("must be a drafter token id in [0, ", draft_vocab, ")"));
  std::vector<bool> used(target_vocab, false);
  for (int64_t t : map.draft_to_target) {
    if (t < -1 || t >= target_vocab)
      return file.Error("d2t", absl::StrCat("target id ", t, " is outside [-1, ", target_vocab, ")"));
    if (t >= 0 && used[t]) return file.Error("d2t", absl::StrCat("target id ", t, " is mapped twice"));
    if (t >= 0) used[t] = true;
  }
  return map;
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "model",
    .description = "independent small LM sharing the target's vocabulary (Leviathan/Chen); gives q rows",
    .lossless = "-",
    .create = [](Options& options, const DrafterEnvironment& env) -> absl::StatusOr<std::unique_ptr<Drafter>> {
      ASSIGN_OR_RETURN(std::string path, options.GetString("path"));
      auto model = LlamaModel::Load(options.ResolvePath(path), env.device, env.dtype, env.kv_capacity);
      if (!model.ok()) return options.Error("path", std::string(model.status().message()));
      ASSIGN_OR_RETURN(std::string map_path, options.GetString("vocab_map", ""));
      std::optional<VocabularyMap> vocab_map;
      if (!map_path.empty()) {
        if (env.target == nullptr) return options.Error("vocab_map", "needs a target model");
        auto map = ReadVocabularyMap(options.ResolvePath(map_path), (*model)->config().vocab_size,
                                     env.target->config().vocab_size);
        if (!map.ok()) return options.Error("vocab_map", std::string(map.status().message()));
        vocab_map = *std::move(map);
      } else if (env.target != nullptr && (*model)->config().vocab_size != env.target->config().vocab_size) {
        return options.Error("path", absl::StrCat("drafter vocabulary (", (*model)->config().vocab_size,
                                                  " tokens) differs from the target's (",
                                                  env.target->config().vocab_size,
                                                  "); a drafter must share the target's tokenizer, or configure "
                                                  "vocab_map: a YAML file with d2t: [target id of each drafter id, "
                                                  "-1 if none] and optionally unknown: <drafter id>"));
      } else if (env.target != nullptr) {
        // Same size is not the same tokenizer: a BOS id that differs betrays
        // another one. (Not EOS: a base drafter for an instruct target ends
        // text where the target ends a turn, with one tokenizer.)
        const int64_t d = (*model)->config().bos_token_id, t = env.target->config().bos_token_id;
        if (d >= 0 && t >= 0 && d != t)
          return options.Error("path", absl::StrCat("the drafter's config.json has bos_token_id ", d,
                                                    ", the target's ", t,
                                                    ": the drafter was trained with another tokenizer"));
      }
      return std::unique_ptr<Drafter>(std::make_unique<ModelDrafter>(*std::move(model), std::move(vocab_map)));
    },
});

}  // namespace
}  // namespace speclab
