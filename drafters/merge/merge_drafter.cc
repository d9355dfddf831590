// `merge`: several drafters in one method, their drafts in one tree.
//
// Token-only drafters (SpecInfer's and MCSD's merged trees, for drafters
// that give tokens; docs/algorithms.md §4.8): their candidates merged into
// one trie.
//
//   drafter:
//     type: merge
//     drafters: [{type: prompt_lookup}, {type: suffix_tree}, {type: retrieval, datastore: results/train.splds}]
//     order: priority
//   tree_builder: {type: trie, budget: 32, max_candidates: 24}
//
// Drafters of logits (SpecInfer's merged trees of several small models): a
// branch per drafter, each sampled from its own q, by the `part_chains`
// builder (Drafter::part_count, PartLogits), verified by specinfer or
// point_mass.
//
//   drafter: {type: merge, drafters: [{type: model, path: models/speclab-drafter}, {type: eagle, path: ...}]}
//   tree_builder: {type: part_chains}
//
// Options: drafters (a list of drafter specs, all token-only or all of
// logits), order (token-only: `priority`, every candidate of the first
// drafter, then the second's, ..., as Hierarchy Drafting queries its
// databases from the most local down; `interleave`, the drafters' first
// candidates, then their second, ...). Duplicate candidates count once. With
// the `chain` builder, the first drafter in order that proposes anything
// drafts the step. Every step goes to every drafter (Reset, BeginStep,
// EndStep, each with the target features it asked for), so each keeps its
// own state. A merged trie is deterministic: verify with greedy or
// point_mass. Where every part gives its candidates on the device
// (DeviceDrafter::ContinuationsAt: every token-only drafter's), so does the
// merge, and its tries run pipelined, lookahead's riders gathered on the
// device (RidersAt).
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/merge/merge_device.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_drafter.h"
#include "framework/device/side_streams.h"
#include "framework/drafter.h"

namespace speclab {
namespace {

using merge::Candidates;

class MergeDrafter final : public Drafter, public DeviceDrafter {
 public:
  MergeDrafter(std::vector<std::unique_ptr<Drafter>> drafters, std::vector<std::string> names, bool interleave)
      : drafters_(std::move(drafters)),
        names_(std::move(names)),
        kind_(drafters_.front()->kind()),
        interleave_(interleave) {}

  DrafterKind kind() const override { return kind_; }

  // Every part's request, in part order.
  TargetFeatureRequest target_features() const override {
    TargetFeatureRequest all;
    for (const auto& d : drafters_) {
      const std::vector<int> layers = d->target_features().hidden_layers;
      all.hidden_layers.insert(all.hidden_layers.end(), layers.begin(), layers.end());
    }
    return all;
  }

  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override {
    for (size_t i = 0; i < drafters_.size(); ++i) RETURN_IF_ERROR(drafters_[i]->Reset(prompt, Share(target, i)));
    return absl::OkStatus();
  }
  absl::Status BeginStep(absl::Span<const int32_t> context) override {
    for (auto& d : drafters_) RETURN_IF_ERROR(d->BeginStep(context));
    return absl::OkStatus();
  }
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override {
    for (size_t i = 0; i < drafters_.size(); ++i) {
      if (part_count() == 1) {
        RETURN_IF_ERROR(drafters_[i]->EndStep(tree, accepted_path, Share(target, i)));
        continue;
      }
      const Branch branch = BranchOf(tree, static_cast<int>(i), accepted_path);
      std::vector<int> path;
      for (int node : accepted_path) path.push_back(branch.local[node]);
      RETURN_IF_ERROR(drafters_[i]->EndStep(branch.tree, path, Share(target, i)));
    }
    return absl::OkStatus();
  }

  // Drafters of logits: a part each.
  int part_count() const override {
    return kind_ == DrafterKind::kDistributions ? static_cast<int>(drafters_.size()) : 1;
  }
  absl::StatusOr<at::Tensor> PartLogits(int part, const TokenTree& tree, absl::Span<const int> nodes,
                                        const at::Tensor& node_tokens) override {
    if (kind_ != DrafterKind::kDistributions || part < 0 || part >= static_cast<int>(drafters_.size()))
      return absl::InvalidArgumentError(absl::StrCat("merge: no part ", part, " of ", part_count()));
    const Branch branch = BranchOf(tree, part, {});
    std::vector<int> local;
    for (int node : nodes) {
      if (node < 0 || node >= tree.size() || branch.local[node] < 0)
        return absl::InvalidArgumentError(absl::StrCat("merge: node ", node, " is not in part ", part, "'s branch"));
      local.push_back(branch.local[node]);
    }
    return drafters_[part]->NextTokenLogits(branch.tree, local, node_tokens);
  }
  Drafter& Part(int part) override { return *drafters_.at(part); }
  // One drafter of logits is itself (CheckCompatible refuses several to builders that do not draft per part).
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override {
    if (part_count() != 1)
      return absl::FailedPreconditionError(absl::StrCat("merge: ", part_count(), " drafters of logits draft a branch "
                                                        "each (tree builder part_chains)"));
    return drafters_.front()->NextTokenLogits(tree, nodes, node_tokens);
  }

  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override {
    for (auto& d : drafters_) {
      ASSIGN_OR_RETURN(std::vector<int32_t> tokens, d->Continuation(tree, node, max_tokens));
      if (!tokens.empty()) return tokens;
    }
    return std::vector<int32_t>{};
  }

  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override {
    std::vector<Candidates> each;
    for (auto& d : drafters_) {
      ASSIGN_OR_RETURN(auto candidates, d->Continuations(tree, node, max_tokens, max_candidates));
      each.push_back(std::move(candidates));
    }
    return merge::MergeInOrder(each, interleave_, max_candidates);
  }

  // Chains take the first part that proposes anything, which only the host
  // knows (a part's device chain is filled to its length).
  absl::StatusOr<at::Tensor> ContinuationAt(const DeviceRoot&, int) override {
    return absl::UnimplementedError("merge: a chain is the first part's that proposes anything; it steps on the host");
  }

  // Every part's ContinuationsAt, merged as Continuations() merges them
  // (merge_device.h).
  absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                      int max_candidates) override {
    if (kind_ != DrafterKind::kTokensOnly)
      return absl::UnimplementedError("merge: drafters of logits draft a branch each (part_chains)");
    if (!root.context.defined())
      return absl::UnimplementedError("merge: the step handed over no context on the device");
    for (size_t i = 0; i < drafters_.size(); ++i)
      if (DeviceFormOf(*drafters_[i]) == nullptr)
        return absl::UnimplementedError(absl::StrCat("merge: part ", i, " (", names_[i], ") has no device form"));
    // The parts' lookups side by side on the device.
    std::vector<DeviceContinuations> parts(drafters_.size());
    std::vector<SideWork> lookups;
    for (size_t i = 0; i < drafters_.size(); ++i) {
      lookups.push_back([&, i](std::vector<at::Tensor>& made) -> absl::Status {
        auto part = DeviceFormOf(*drafters_[i])->ContinuationsAt(root, max_tokens, max_candidates);
        if (!part.ok())
          return absl::Status(part.status().code(),
                              absl::StrCat("merge: part ", i, " (", names_[i], "): ", part.status().message()));
        parts[i] = *std::move(part);
        made = {parts[i].tokens, parts[i].lengths};
        return absl::OkStatus();
      });
    }
    RETURN_IF_ERROR(RunSideBySide(root.context.device(), lookups));
    return merge::MergeOnDevice(parts, interleave_, max_candidates,
                                root.last_two.narrow(0, 1, 1).to(root.context.device()));
  }

  // Each drafter's riders (lookahead's window) ride in the one forward.
  absl::StatusOr<RiderTokens> Riders() override { return riders_.Gather(Parts()); }
  absl::Status RidersScored(const at::Tensor& logits) override { return riders_.Scatter(Parts(), logits); }
  // And on the device, after ContinuationsAt (every part has a device form).
  absl::StatusOr<DeviceRiders> RidersAt() override { return device_riders_.Gather(Parts()); }
  absl::Status RidersScoredAt(const at::Tensor& logits) override { return device_riders_.Scatter(Parts(), logits); }

  std::vector<LanguageModel*> models() override {
    std::vector<LanguageModel*> out;
    for (auto& d : drafters_)
      for (LanguageModel* m : d->models()) out.push_back(m);
    return out;
  }

 private:
  // Part `part`'s branch of `tree` as a tree of its own (Drafter::PartLogits):
  // the root, the nodes under the root's part-th child in `tree`'s order, then
  // those of `path` not among them. local[node]: its id there, -1 outside.
  struct Branch {
    TokenTree tree;
    std::vector<int> local;
  };
  static Branch BranchOf(const TokenTree& tree, int part, absl::Span<const int> path) {
    Branch branch{TokenTree(tree.token(0)), std::vector<int>(tree.size(), -1)};
    branch.local[0] = 0;
    const std::vector<int>& top = tree.children(0);
    const int first = part < static_cast<int>(top.size()) ? top[part] : -1;
    for (int node = 1; node < tree.size(); ++node) {
      const int parent = tree.parent(node);
      if (node == first || (parent > 0 && branch.local[parent] >= 0))
        branch.local[node] = branch.tree.AddNode(branch.local[parent], tree.token(node));
    }
    for (int node : path)
      if (branch.local[node] < 0)
        branch.local[node] = branch.tree.AddNode(branch.local[tree.parent(node)], tree.token(node));
    return branch;
  }

  // The features part `i` asked for, out of every part's (target_features()).
  TargetFeatures Share(const TargetFeatures& all, size_t i) const {
    size_t from = 0;
    for (size_t j = 0; j < i; ++j) from += drafters_[j]->target_features().hidden_layers.size();
    const size_t count = drafters_[i]->target_features().hidden_layers.size();
    TargetFeatures mine;
    for (size_t k = from; k < from + count && k < all.hidden.size(); ++k) mine.hidden.push_back(all.hidden[k]);
    return mine;
  }

  std::vector<Drafter*> Parts() const {
    std::vector<Drafter*> parts;
    for (const auto& d : drafters_) parts.push_back(d.get());
    return parts;
  }

  std::vector<std::unique_ptr<Drafter>> drafters_;
  std::vector<std::string> names_;  // the parts' registry names
  const DrafterKind kind_;          // every part's
  bool interleave_;
  RiderParts riders_;
  DeviceRiderParts device_riders_;
};

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  ASSIGN_OR_RETURN(std::vector<Options> specs, options.GetMapList("drafters"));
  if (specs.empty()) return options.Error("drafters", "expected at least one drafter");
  ASSIGN_OR_RETURN(std::string order, options.GetString("order", "priority"));
  if (order != "priority" && order != "interleave")
    return options.Error("order", absl::StrCat("expected priority or interleave, got '", order, "'"));
  std::vector<std::unique_ptr<Drafter>> drafters;
  std::vector<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<Drafter> drafter, DrafterRegistry::Create(specs[i], "drafter", env));
    names.push_back(*specs[i].GetString("type"));
    if (!drafters.empty() && drafter->kind() != drafters.front()->kind())
      return specs[i].Error("type", drafter->kind() == DrafterKind::kTokensOnly
                                        ? "merge takes drafters of one kind: the first gives next-token logits, "
                                          "this one tokens only"
                                        : "merge takes drafters of one kind: the first gives tokens only, this one "
                                          "next-token logits");
    drafters.push_back(std::move(drafter));
  }
  return std::unique_ptr<Drafter>(
      std::make_unique<MergeDrafter>(std::move(drafters), std::move(names), order == "interleave"));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "merge",
    .description = "several drafters in one method: token-only ones' candidates merged into one trie (trie "
                   "builder), or a branch per drafter of logits from its own q (part_chains builder)",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
