// `part_chains`: a tree whose branches come from different drafters
// (SpecInfer's merged token trees of several small models; docs/algorithms.md
// §2.10). The drafter is a `merge` of drafters of logits: each of its parts
// samples a chain of the length policy's length from the root, from its own
// warped q, and the chains are the root's branches, each node carrying the q
// row its token was drawn from.
//
//   drafter:
//     type: merge
//     drafters: [{type: model, path: models/speclab-drafter}, {type: eagle, path: models/heads/eagle.safetensors}]
//   tree_builder: {type: part_chains}
//   verifier: {type: specinfer}        # or point_mass; greedy at T = 0
//
// Siblings are drawn independently, each from its own drafter's row
// (kIndependent with one q row per child): SpecInfer's rule, which tries each
// child against its own row, keeps the target's law; rules for siblings of
// one shared row (rrs, rrs_wor, spectr, khisti, traversal) are refused when
// the method is loaded. Equal prefixes of two branches stay two nodes: a
// merged node would need the rule to try its token once per drafter. Tokens
// stay on the device while drafting (the parts read them from there); the
// step's one read brings them back. At temperature 0 each part drafts its
// greedy chain (q one-hot). The length policy's MaxDraftLength() is read once
// a step. A part with a device chain (DeviceFormOf(Part(p))->DraftChain: a
// model drafter's one CUDA graph) drafts its branch in one call; the others
// token by token.
//
// Device form (BuildAt, for pipelined trees): every part drafts its branch
// from the device's root (DraftChainAt), feeding again the `length` - 1
// tokens before the last accepted one (DeviceRoot::refeed: the last step may
// have accepted another part's branch, which its cache never saw); the tree's shape, fixed by the
// parts and the length, is made once and kept on the device. Parts without
// device chains, or more than one part reading the target's features, keep
// the steps on the host.
#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/common/sampling_pick.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_drafter.h"
#include "framework/device/device_tree_builder.h"
#include "framework/sampling.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

constexpr char kName[] = "part_chains";

class PartChainsTreeBuilder final : public TreeBuilder, public DeviceTreeBuilder {
 public:
  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = true, .samples_tokens = true,
            .length_control = LengthControl::kMaxLength, .drafts_per_part = true};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    if (request.generator == nullptr) return absl::InvalidArgumentError("part_chains: no drafting generator");
    const int length = request.policy->MaxDraftLength();
    DraftTree out;
    out.tree = TokenTree(request.root_token);
    std::vector<at::Tensor> tokens{tree_builders::TokensToDevice({request.root_token}, request.device)};
    std::vector<at::Tensor> rows;
    for (int part = 0; part < drafter.part_count(); ++part) {
      ASSIGN_OR_RETURN(Chain chain, DraftPart(drafter, part, request, length, out.tree));
      tokens.push_back(chain.tokens);
      rows.push_back(chain.rows);
    }
    out.tokens = at::cat(tokens);
    // At temperature 0 q is each token's one-hot: no rows (the engine knows them).
    if (!request.sampling.greedy() && !rows.empty()) {
      rows.insert(rows.begin(), at::zeros({1, rows.front().size(1)}, rows.front().options()));  // the root's
      out.draft_probs = at::cat(rows);
    }
    out.sampling = DraftSampling::kIndependent;
    return out;
  }

  absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request, const DeviceRoot& root) override {
    if (request.generator == nullptr) return absl::InvalidArgumentError("part_chains: no drafting generator");
    if (request.policy->wants_progress())
      return absl::UnimplementedError("part_chains: the length policy reads each drafted token on the host");
    const int length = request.policy->MaxDraftLength();
    const int parts = drafter.part_count();
    // The step hands over the merge's features: one part's request at most.
    int readers = 0;
    for (int part = 0; part < parts; ++part) readers += !drafter.Part(part).target_features().empty();
    if (readers > 1)
      return absl::UnimplementedError("part_chains: several parts read the target's features, which merge shares "
                                      "out on the host");
    // Up to `length` drafts of another part's branch may have been accepted:
    // all but the last lie before last_two[0], which every part feeds anyway.
    DeviceRoot refed = root;
    refed.refeed = length - 1;
    std::vector<at::Tensor> tokens{root.last_two.narrow(0, 1, 1).to(request.device, at::kLong)};
    std::vector<at::Tensor> rows;
    for (int part = 0; part < parts; ++part) {
      DeviceDrafter* device = DeviceFormOf(drafter.Part(part));
      if (device == nullptr) return absl::UnimplementedError(absl::StrCat("part_chains: part ", part, " has no device form"));
      ASSIGN_OR_RETURN(ChainResult chain,
                       device->DraftChainAt(refed, length, tree_builders::SamplingPick(request.sampling,
                                                                                        request.generator)));
      tokens.push_back(chain.tokens.narrow(0, 1, length).to(request.device, at::kLong));
      rows.push_back(chain.rows);
    }
    DraftTree out;
    out.tree = TokenTree(request.root_token);
    out.tokens = at::cat(tokens);
    if (!request.sampling.greedy() && !rows.empty()) {
      rows.insert(rows.begin(), at::zeros({1, rows.front().size(1)}, rows.front().options()));  // the root's
      out.draft_probs = at::cat(rows);
    }
    out.sampling = DraftSampling::kIndependent;
    out.device_shape = ShapeOf(parts, length, request.device);
    return out;
  }

 private:
  // The tree of `parts` branches of `length` nodes under the root, in Build()'s
  // order (branch p's node i is 1 + p * length + i), on `device`: made once.
  DraftTree::DeviceShape ShapeOf(int parts, int length, c10::Device device) {
    if (shape_ && shape_parts_ == parts && shape_length_ == length && shape_->parents.device() == device)
      return *shape_;
    const int64_t n = 1 + static_cast<int64_t>(parts) * length;
    at::Tensor parents = at::empty({n}, at::kLong), depths = at::empty({n}, at::kLong);
    at::Tensor mask = at::zeros({n, n}, at::kBool);
    int64_t* parent = parents.data_ptr<int64_t>();
    int64_t* depth = depths.data_ptr<int64_t>();
    bool* sees = mask.data_ptr<bool>();
    parent[0] = -1;
    depth[0] = 0;
    sees[0] = true;
    for (int64_t node = 1; node < n; ++node) {
      const int64_t i = (node - 1) % length;  // the node's place in its branch
      parent[node] = i == 0 ? 0 : node - 1;
      depth[node] = i + 1;
      for (int64_t above = node; above >= 0; above = parent[above]) sees[node * n + above] = true;
    }
    shape_ = DraftTree::DeviceShape{.parents = parents.to(device), .depths = depths.to(device),
                                    .mask = mask.to(device), .depth_bound = length, .branching_bound = parts};
    shape_parts_ = parts;
    shape_length_ = length;
    return *shape_;
  }

  struct Chain {
    at::Tensor tokens;  // [length] int64 on the device
    at::Tensor rows;    // [length, vocab]: the q rows they were drawn from (undefined at temperature 0)
  };

  // Part `part`'s chain, hung under the root of `tree` as its next child
  // (its nodes' tokens placeholders, read back with the step's verdict): by
  // the part's device form in one call where it has one (a model drafter's
  // chain graph on CUDA), else token by token through PartLogits, each token
  // read by the next forward on the device.
  static absl::StatusOr<Chain> DraftPart(Drafter& drafter, int part, const BuildRequest& request, int length,
                                         TokenTree& tree) {
    if (DeviceDrafter* device = DeviceFormOf(drafter.Part(part))) {
      absl::StatusOr<ChainResult> chain =
          device->DraftChain(length, tree_builders::SamplingPick(request.sampling, request.generator));
      if (chain.ok()) {
        for (int depth = 1, last = 0; depth <= length; ++depth) last = tree.AddNode(last, /*token=*/-1);
        return Chain{.tokens = chain->tokens.narrow(0, 1, length), .rows = chain->rows};
      }
      if (chain.status().code() != absl::StatusCode::kUnimplemented) return chain.status();
    }
    std::vector<at::Tensor> tokens, rows;
    int last = 0;
    at::Tensor last_token;  // on the device; undefined for the root
    for (int depth = 1; depth <= length; ++depth) {
      ASSIGN_OR_RETURN(at::Tensor logits, drafter.PartLogits(part, tree, {last}, last_token));
      const at::Tensor q = Probabilities(logits, request.sampling);
      last_token = SampleRows(q, *request.generator).reshape({1});
      last = tree.AddNode(last, /*token=*/-1);
      tokens.push_back(last_token.to(request.device));
      rows.push_back(q);
    }
    return Chain{.tokens = at::cat(tokens), .rows = at::cat(rows)};
  }

  std::optional<DraftTree::DeviceShape> shape_;  // ShapeOf()'s last
  int shape_parts_ = 0, shape_length_ = 0;
};

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "a branch per part of a merge of drafters of logits, each a chain sampled from its own q "
                   "(SpecInfer's merged trees; specinfer or point_mass)",
    .lossless = "-",
    .create = [](Options&) -> absl::StatusOr<std::unique_ptr<TreeBuilder>> {
      return std::unique_ptr<TreeBuilder>(std::make_unique<PartChainsTreeBuilder>());
    },
});

}  // namespace
}  // namespace speclab
