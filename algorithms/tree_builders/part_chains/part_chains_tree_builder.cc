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
// a step. No device form: steps run one at a time.
#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "framework/core/status_macros.h"
#include "framework/sampling.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

constexpr char kName[] = "part_chains";

class PartChainsTreeBuilder final : public TreeBuilder {
 public:
  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = true, .samples_tokens = true,
            .length_control = LengthControl::kMaxLength, .drafts_per_part = true};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    if (request.generator == nullptr) return absl::InvalidArgumentError("part_chains: no drafting generator");
    const int parts = drafter.part_count();
    const int length = request.policy->MaxDraftLength();
    DraftTree out;
    out.tree = TokenTree(request.root_token);
    std::vector<at::Tensor> tokens{tree_builders::TokensToDevice({request.root_token}, request.device)};
    std::vector<at::Tensor> rows;
    std::vector<int> last(parts, 0);               // each part's chain so far ends here
    std::vector<at::Tensor> last_token(parts);    // its token on the device (undefined: the root)
    for (int depth = 1; depth <= length; ++depth) {
      for (int part = 0; part < parts; ++part) {
        ASSIGN_OR_RETURN(at::Tensor logits, drafter.PartLogits(part, out.tree, {last[part]}, last_token[part]));
        const at::Tensor q = Probabilities(logits, request.sampling);
        last_token[part] = SampleRows(q, *request.generator).reshape({1});
        last[part] = out.tree.AddNode(last[part], /*token=*/-1);  // read back with the step's verdict
        tokens.push_back(last_token[part].to(request.device));
        rows.push_back(q);
      }
    }
    out.tokens = at::cat(tokens);
    if (!rows.empty()) {
      rows.insert(rows.begin(), at::zeros_like(rows.front()));  // the root was not drawn
      out.draft_probs = at::cat(rows);
    }
    out.sampling = DraftSampling::kIndependent;
    return out;
  }
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
