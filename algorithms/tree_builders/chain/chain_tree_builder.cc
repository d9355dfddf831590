// `chain`: one path of up to MaxDraftLength() tokens (shared/ALGORITHMS.md §2.2).
//
// With a distribution drafter every token is drawn from the drafter's
// processed distribution q (argmax at temperature 0) on the device, and the
// next drafter forward consumes it there: drafting never waits for the host
// unless the length policy reads each token's probability.
#include <ATen/ATen.h>

#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

class ChainTreeBuilder final : public TreeBuilder {
 public:
  TreeBuilderTraits traits() const override {
    return {.needs_distributions = false, .may_branch = false, .samples_tokens = true};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    return drafter.kind() == DrafterKind::kTokensOnly ? BuildFromContinuation(drafter, request)
                                                      : BuildBySampling(drafter, request);
  }

 private:
  static absl::StatusOr<DraftTree> BuildFromContinuation(Drafter& drafter, const BuildRequest& request) {
    DraftTree out;
    out.tree = TokenTree(request.root_token);
    const int max_length = request.policy->MaxDraftLength();
    ASSIGN_OR_RETURN(std::vector<int32_t> continuation, drafter.Continuation(out.tree, 0, max_length));
    std::vector<int64_t> tokens{request.root_token};
    int node = 0;
    for (int32_t token : continuation) {
      if (static_cast<int>(tokens.size()) > max_length) break;
      node = out.tree.AddNode(node, token);
      tokens.push_back(token);
      if (request.policy->wants_progress() &&
          !request.policy->ContinueDrafting({.depth = out.tree.depth(node)}))
        break;
    }
    out.tokens = LongsToDevice(tokens, request.device);
    out.sampling = DraftSampling::kDeterministic;
    return out;
  }

  static absl::StatusOr<DraftTree> BuildBySampling(Drafter& drafter, const BuildRequest& request) {
    DraftTree out;
    out.tree = TokenTree(request.root_token);
    const int max_length = request.policy->MaxDraftLength();
    std::vector<at::Tensor> tokens{LongsToDevice({request.root_token}, request.device)};
    std::vector<at::Tensor> rows;
    int node = 0;
    for (int depth = 1; depth <= max_length; ++depth) {
      ASSIGN_OR_RETURN(at::Tensor logits,
                       drafter.NextTokenLogits(out.tree, {node}, node == 0 ? at::Tensor() : tokens.back()));
      at::Tensor q = Probabilities(logits, request.sampling);
      at::Tensor token = request.sampling.greedy() ? GreedyTokens(q) : SampleRows(q, *request.generator);
      node = out.tree.AddNode(node, /*token=*/-1);  // filled in after the step's transfer
      tokens.push_back(token);
      rows.push_back(q);
      if (request.policy->wants_progress()) {
        at::Tensor row = q[0];
        const double probability = row[token.item<int64_t>()].item<double>();
        const double entropy = -(row * row.clamp_min(1e-30).log()).sum().item<double>();
        if (!request.policy->ContinueDrafting(
                {.depth = depth, .draft_probability = probability, .draft_entropy = entropy}))
          break;
      }
    }
    out.tokens = at::cat(tokens);
    if (!rows.empty()) {
      rows.insert(rows.begin(), at::zeros_like(rows.front()));  // the root was not drafted
      out.draft_probs = at::cat(rows);
    }
    // A one-hot q at temperature 0 is exactly the law of an argmax draft.
    out.sampling = DraftSampling::kIndependent;
    return out;
  }
};

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = "chain",
    .description = "a single path of up to gamma tokens (the length policy's bound)",
    .lossless = "-",
    .create = [](Options&) -> absl::StatusOr<std::unique_ptr<TreeBuilder>> {
      return std::unique_ptr<TreeBuilder>(std::make_unique<ChainTreeBuilder>());
    },
});

}  // namespace
}  // namespace speclab
