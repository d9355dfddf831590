// `trie`: a token-only drafter's candidate continuations merged into a prefix
// tree (docs/algorithms.md §2.9), the way retrieval drafters draft (REST's
// trie of datastore continuations, prompt lookup's matches).
//
//   tree_builder: {type: trie, budget: 32, max_candidates: 8}
//
// Options: budget (drafted nodes, root excluded; 32), max_candidates (8),
// max_depth (tokens per continuation; default: the length policy's
// MaxDraftLength() each step).
//
// The drafter's continuations of the root (Drafter::Continuations, best
// first) are inserted in order, each token by token from the root: a token
// already under its parent is shared, a new one becomes a node while the
// budget lasts, and the continuation stops where it runs out. So the first
// continuation is always drafted in full (up to the budget), siblings are
// distinct tokens, and with one candidate the tree is the chain builder's.
//
// Tokens come from the drafter with no distribution: kDeterministic, verified
// by greedy or point_mass. Drafters of logits are refused at load (use
// dynamic_topk, best_first or opt_tree for those).
//
// Pipelined (BuildAt), drafters with device-rooted candidates
// (DeviceDrafter::ContinuationsAt) give them on the device, and the same
// tree is made there (trie_device.h), filled to a fixed size.
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/trie/trie_device.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_tree_builder.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

constexpr char kName[] = "trie";

struct TrieOptions {
  int budget = 32;
  int max_candidates = 8;
  std::optional<int> max_depth;  // unset: the length policy's bound
};

class TrieTreeBuilder final : public TreeBuilder, public DeviceTreeBuilder {
 public:
  explicit TrieTreeBuilder(TrieOptions options) : o_(options) {}

  TreeBuilderTraits traits() const override {
    return {.needs_distributions = false, .needs_continuations = true, .may_branch = true, .samples_tokens = false,
            .length_control = o_.max_depth ? LengthControl::kNone : LengthControl::kMaxLength};
  }

  absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request, const DeviceRoot& root) override {
    if (request.policy->wants_progress()) return absl::UnimplementedError("the length policy reads each drafted token");
    DeviceDrafter* device = DeviceFormOf(drafter);
    if (device == nullptr) return absl::UnimplementedError("the drafter has no device form");
    ASSIGN_OR_RETURN(DeviceContinuations candidates, device->ContinuationsAt(root, Depth(request), o_.max_candidates));
    DraftTree draft = tree_builders::TrieOnDevice(root.last_two.narrow(0, 1, 1), candidates, o_.budget);
    draft.tree = TokenTree(request.root_token);
    return draft;
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    const int depth = Depth(request);
    DraftTree out;
    out.tree = TokenTree(request.root_token);
    ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> candidates,
                     drafter.Continuations(out.tree, 0, depth, o_.max_candidates));
    std::map<std::pair<int, int32_t>, int> child;  // (parent, token) -> node
    for (size_t c = 0; c < candidates.size() && c < static_cast<size_t>(o_.max_candidates); ++c) {
      int node = 0;
      for (size_t i = 0; i < candidates[c].size() && static_cast<int>(i) < depth; ++i) {
        const int32_t token = candidates[c][i];
        if (token < 0)
          return absl::InternalError(absl::StrCat(kName, ": the drafter proposed token ", token));
        auto found = child.find({node, token});
        if (found != child.end()) {
          node = found->second;
          continue;
        }
        if (out.tree.size() - 1 >= o_.budget) break;
        const int added = out.tree.AddNode(node, token);
        child[{node, token}] = added;
        node = added;
      }
    }
    out.tokens = tree_builders::TokensToDevice(out.tree.tokens(), request.device);
    out.sampling = DraftSampling::kDeterministic;
    return out;
  }

 private:
  int Depth(const BuildRequest& request) const {
    return o_.max_depth ? *o_.max_depth : request.policy->MaxDraftLength();
  }

  TrieOptions o_;
};

absl::StatusOr<std::unique_ptr<TreeBuilder>> Create(Options& options) {
  TrieOptions o;
  ASSIGN_OR_RETURN(int64_t budget, options.GetInt("budget", o.budget));
  if (budget < 1 || budget > 4096) return options.Error("budget", "expected a number of drafted nodes in [1, 4096]");
  o.budget = static_cast<int>(budget);
  ASSIGN_OR_RETURN(int64_t candidates, options.GetIntIn("max_candidates", o.max_candidates, 1, 1024));
  o.max_candidates = static_cast<int>(candidates);
  if (options.Has("max_depth")) {
    ASSIGN_OR_RETURN(int64_t depth, options.GetIntIn("max_depth", std::nullopt, 1, 256));
    o.max_depth = static_cast<int>(depth);
  }
  return std::unique_ptr<TreeBuilder>(std::make_unique<TrieTreeBuilder>(o));
}

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "a token-only drafter's candidate continuations merged into a prefix tree within a node budget "
                   "(retrieval-style trees); deterministic, verify with point_mass/greedy (§2.9)",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
