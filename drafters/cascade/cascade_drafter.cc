// `cascade`: a drafter whose own drafting is sped up by a cheaper one
// (staged speculative decoding; docs/algorithms.md §4.15).
//
//   drafter:
//     type: cascade
//     drafter: {type: model, path: models/speclab-drafter}   # gives q rows
//     proposer: {type: prompt_lookup, max_ngram_size: 3}     # gives tokens only
//     proposal_tokens: 4
//
// When the tree builder asks for q after a node whose q is not known yet,
// the proposer guesses how the node's path goes on, and the drafter computes
// q after the node and after each guessed token in one forward (tree
// attention: every row sees its own path only). A guess the builder then
// draws is a hit: its q is already there, and drafting it costs no forward.
// q after any node is the drafter's own q after that node's path, so the
// cascade drafts what the drafter alone drafts, by the same law, with fewer
// of its forwards; every verifier that takes the drafter takes the cascade.
// The proposals live in a tree of the cascade's own (the builder's nodes
// and the guesses), which the drafter and the proposer are fed.
//
// Its device form (pipelined decoding) drafts a chain in rounds on the
// device: the proposer's guess (DeviceDrafter::GuessOf, a function of the
// sequence alone) after the chain's last token, one drafter forward of that
// token and the guesses, and the picks through the guesses they match, each
// round after the first skipped once the chain is complete
// (DeviceModel::ForwardChainInRoundsAt). Trees grown level by level are the
// drafter's own levels: a level of several nodes is one forward whatever the
// guesses, so the device form takes no guesses there.
#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_drafter.h"
#include "framework/drafter.h"

namespace speclab {
namespace {

class CascadeDrafter final : public Drafter, public DeviceDrafter {
 public:
  CascadeDrafter(std::unique_ptr<Drafter> drafter, std::unique_ptr<Drafter> proposer, int proposal_tokens)
      : drafter_(std::move(drafter)), proposer_(std::move(proposer)), proposal_tokens_(proposal_tokens) {}

  DrafterKind kind() const override { return DrafterKind::kDistributions; }
  TargetFeatureRequest target_features() const override { return drafter_->target_features(); }

  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override {
    RETURN_IF_ERROR(drafter_->Reset(prompt, target));
    return proposer_->Reset(prompt, TargetFeatures{});
  }

  absl::Status BeginStep(absl::Span<const int32_t> context) override {
    RETURN_IF_ERROR(drafter_->BeginStep(context));
    RETURN_IF_ERROR(proposer_->BeginStep(context));
    tree_ = TokenTree(context.back());
    mirror_ = {0};
    logits_.assign(1, at::Tensor());
    return absl::OkStatus();
  }

  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override {
    std::vector<int32_t> tokens(nodes.size());
    if (node_tokens.defined()) {  // drafted on the device: the host form reads them
      const at::Tensor host = node_tokens.to(at::kCPU, at::kLong).contiguous();
      for (size_t i = 0; i < nodes.size(); ++i) tokens[i] = static_cast<int32_t>(host.data_ptr<int64_t>()[i]);
    } else {
      for (size_t i = 0; i < nodes.size(); ++i) tokens[i] = tree.token(nodes[i]);
    }
    // The listed nodes in the cascade's tree, parents first.
    std::vector<size_t> order(nodes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return nodes[a] < nodes[b]; });
    std::vector<int> mine(nodes.size());
    for (size_t i : order) {
      ASSIGN_OR_RETURN(mine[i], Mirror(tree, nodes[i], tokens[i]));
    }
    // Each node without q, and the proposer's guesses after it, in one forward.
    std::vector<int> fed;
    for (size_t i : order) {
      int node = mine[i];
      if (logits_[node].defined() || std::find(fed.begin(), fed.end(), node) != fed.end()) continue;
      fed.push_back(node);
      ASSIGN_OR_RETURN(std::vector<int32_t> guesses, proposer_->Continuation(tree_, node, proposal_tokens_));
      for (int32_t guess : guesses) {
        node = Child(node, guess);
        if (logits_[node].defined() || std::find(fed.begin(), fed.end(), node) != fed.end()) break;
        fed.push_back(node);
      }
    }
    if (!fed.empty()) {
      ASSIGN_OR_RETURN(at::Tensor rows, drafter_->NextTokenLogits(tree_, fed, at::Tensor()));
      for (size_t j = 0; j < fed.size(); ++j) logits_[fed[j]] = rows.narrow(0, static_cast<int64_t>(j), 1);
    }
    std::vector<at::Tensor> out;
    for (int node : mine) out.push_back(logits_[node]);
    return at::cat(out);
  }

  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override {
    std::vector<int> path;
    for (int node : accepted_path) {
      ASSIGN_OR_RETURN(const int mine, Mirror(tree, node, tree.token(node)));
      path.push_back(mine);
    }
    RETURN_IF_ERROR(drafter_->EndStep(tree_, path, target));
    return proposer_->EndStep(tree_, path, TargetFeatures{});
  }

  // The drafter's and the proposer's riders (lookahead's window) ride in the target's forward.
  absl::StatusOr<RiderTokens> Riders() override { return riders_.Gather({drafter_.get(), proposer_.get()}); }
  absl::Status RidersScored(const at::Tensor& logits) override {
    return riders_.Scatter({drafter_.get(), proposer_.get()}, logits);
  }

  absl::StatusOr<ChainResult> DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick) override {
    DeviceDrafter* drafter = DeviceFormOf(*drafter_);
    DeviceDrafter* proposer = DeviceFormOf(*proposer_);
    if (drafter == nullptr || proposer == nullptr)
      return absl::UnimplementedError("cascade: its drafter or its proposer has no device form");
    absl::StatusOr<ChainGuess> guess = proposer->GuessOf(proposal_tokens_);
    if (!guess.ok())
      return absl::Status(guess.status().code(), absl::StrCat("cascade's proposer: ", guess.status().message()));
    return drafter->DraftChainInRoundsAt(root, length, pick, *guess);
  }

  absl::StatusOr<LevelsKept> DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick) override {
    DeviceDrafter* drafter = DeviceFormOf(*drafter_);
    if (drafter == nullptr) return absl::UnimplementedError("cascade: its drafter has no device form");
    return drafter->DraftLevelsAt(root, levels, pick);
  }

  DeviceGraphs* graphs() override { return DraftGraphsOf(*drafter_); }

  std::vector<LanguageModel*> models() override {
    std::vector<LanguageModel*> out = drafter_->models();
    for (LanguageModel* model : proposer_->models()) out.push_back(model);
    return out;
  }

 private:
  // The child of the cascade's `node` by `token`, added where missing.
  int Child(int node, int32_t token) {
    const int child = tree_.FindChild(node, token);
    if (child >= 0) return child;
    logits_.emplace_back();
    return tree_.AddNode(node, token);
  }

  // The cascade's node for the builder's `node` of token `token` (its parent
  // must be known: builders list ancestors first).
  absl::StatusOr<int> Mirror(const TokenTree& tree, int node, int32_t token) {
    if (node < 0 || node >= tree.size()) return absl::InvalidArgumentError(absl::StrCat("cascade: no node ", node));
    if (node < static_cast<int>(mirror_.size()) && mirror_[node] >= 0) return mirror_[node];
    const int parent = tree.parent(node);
    if (parent < 0 || parent >= static_cast<int>(mirror_.size()) || mirror_[parent] < 0)
      return absl::FailedPreconditionError(
          absl::StrCat("cascade: node ", node, " asked for before its parent ", parent));
    if (static_cast<int>(mirror_.size()) <= node) mirror_.resize(node + 1, -1);
    mirror_[node] = Child(mirror_[parent], token);
    return mirror_[node];
  }

  std::unique_ptr<Drafter> drafter_, proposer_;
  const int proposal_tokens_;
  TokenTree tree_{0};       // this step: the builder's nodes and the proposer's guesses
  std::vector<int> mirror_;  // the builder's node -> the cascade's (-1: not seen yet)
  std::vector<at::Tensor> logits_;  // per cascade node: the drafter's q row [1, vocab] once computed
  RiderParts riders_;
};

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  ASSIGN_OR_RETURN(Options drafter_spec, options.GetMap("drafter"));
  ASSIGN_OR_RETURN(Options proposer_spec, options.GetMap("proposer"));
  ASSIGN_OR_RETURN(const int64_t proposal_tokens, options.GetInt("proposal_tokens", 4));
  if (proposal_tokens < 1 || proposal_tokens > 64)
    return options.Error("proposal_tokens", "expected an integer in [1, 64]");
  ASSIGN_OR_RETURN(std::unique_ptr<Drafter> drafter, DrafterRegistry::Create(drafter_spec, "drafter", env));
  if (drafter->kind() != DrafterKind::kDistributions)
    return drafter_spec.Error("type", "a cascade's drafter gives q rows (next-token logits); this one gives tokens "
                                      "only: make it the proposer");
  ASSIGN_OR_RETURN(std::unique_ptr<Drafter> proposer, DrafterRegistry::Create(proposer_spec, "drafter", env));
  if (proposer->kind() != DrafterKind::kTokensOnly)
    return proposer_spec.Error("type", "a cascade's proposer guesses tokens (a token-only drafter: prompt_lookup, "
                                       "ngram_cache, suffix_tree, retrieval, ...); this one gives logits");
  return std::unique_ptr<Drafter>(
      std::make_unique<CascadeDrafter>(std::move(drafter), std::move(proposer), static_cast<int>(proposal_tokens)));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "cascade",
    .description = "staged speculation: a token-only proposer guesses the drafter's path so that one drafter "
                   "forward gives q for several drafts; the drafter's own q and law; gives q rows",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
