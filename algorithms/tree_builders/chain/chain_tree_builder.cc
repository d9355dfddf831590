// `chain`: one path of up to MaxDraftLength() tokens (docs/algorithms.md §2.2).
//
// With a distribution drafter every token is drawn from the drafter's
// processed distribution q (argmax at temperature 0) on the device, and the
// next drafter forward consumes it there: drafting never waits for the host
// unless the length policy reads each token's facts. Drafters with a device
// chain (DeviceDrafter::DraftChain; a LlamaModel drafter on CUDA: one CUDA
// graph) draft the whole chain in one call when the policy fixes the length
// up front, and can draft it from a root only the device knows
// (BuildAt: the engine's pipelined chains), as can token-only drafters
// with device-rooted continuations (DeviceDrafter::ContinuationAt). For a
// policy that stops token by token and has a device form, BuildAt drafts its
// maximum and keeps each token's facts (DraftTree::draft_facts), for the
// engine to cut the chain on the device; drafters whose device chain applies
// the stop (ChainPick::StoppedBy) skip the forwards past it.
#include <ATen/ATen.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/sampling_pick.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/device/device_tree_builder.h"
#include "framework/model/fused_ops.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

class ChainTreeBuilder final : public TreeBuilder, public DeviceTreeBuilder {
 public:
  TreeBuilderTraits traits() const override {
    return {.needs_distributions = false, .may_branch = false, .samples_tokens = true,
            .length_control = LengthControl::kPerToken};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    return drafter.kind() == DrafterKind::kTokensOnly ? BuildFromContinuation(drafter, request)
                                                      : BuildBySampling(drafter, request);
  }

  absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request,
                                         const DeviceRoot& root) override {
    if (request.policy->wants_progress() && request.device_stop == nullptr)
      return absl::UnimplementedError("the length policy reads each drafted token on the host");
    const int length = request.policy->MaxDraftLength();
    DeviceDrafter* device = DeviceFormOf(drafter);
    if (device == nullptr) return absl::UnimplementedError("the drafter has no device form");
    if (drafter.kind() == DrafterKind::kTokensOnly) {
      if (request.device_stop != nullptr)
        return absl::UnimplementedError("the drafter gives tokens only, without facts");
      ASSIGN_OR_RETURN(at::Tensor tokens, device->ContinuationAt(root, length));
      return ChainTree(request.root_token, length, {.tokens = tokens}, DraftSampling::kDeterministic);
    }
    ChainPick pick = Pick(request);
    if (request.device_stop != nullptr) pick = pick.StoppedBy(*request.device_stop, FactsLayoutOf(*request.policy));
    ASSIGN_OR_RETURN(ChainResult chain, device->DraftChainAt(root, length, pick));
    DraftTree draft = ChainTree(request.root_token, length, chain, DraftSampling::kIndependent,
                                request.device_stop != nullptr ? FactsLayoutOf(*request.policy).columns : 0);
    draft.kept_length = chain.kept;
    return draft;
  }

 private:
  // A drafted token's DraftProgress as a [1, 3] row (DeviceDraftFacts'
  // columns): q(token), then the entropy and the top probability of the
  // drafter's own distribution (its logits' softmax, before the warp); then
  // the row the policy reads (`row`): that distribution's log-probabilities
  // ([1, 3 + vocab]), or `hidden`, the drafter's final hidden state there
  // ([1, 3 + hidden]). q undefined: an argmax draft, whose q is the token's
  // one-hot.
  static at::Tensor FactsRow(const at::Tensor& logits, const at::Tensor& q, const at::Tensor& token,
                             DraftRow row = DraftRow::kNone, const at::Tensor& hidden = at::Tensor()) {
    const at::Tensor flat = logits.reshape({1, -1}).to(at::kFloat);
    const at::Tensor facts =
        fused::DraftFactsRows(flat, q.defined() ? q.reshape({1, -1}) : at::Tensor(), token.reshape({1}));
    switch (row) {
      case DraftRow::kNone:
        return facts;
      case DraftRow::kLogProbs:
        return at::cat({facts, flat.log_softmax(-1)}, 1);
      case DraftRow::kHidden:
        return at::cat({facts, hidden.reshape({1, -1}).to(at::kFloat)}, 1);
    }
    return at::Tensor();
  }

  // Where a chain's kept rows (PickWithFacts) keep the facts: their last 3
  // columns, or 3 + the width of the row the policy reads (after q's
  // columns where tokens are sampled).
  static ChainPick::FactsLayout FactsLayoutOf(const DraftLengthPolicy& policy) {
    const DraftRow row = policy.draft_row();
    return {.columns = 3 + (row == DraftRow::kNone ? 0 : policy.draft_row_width()), .row = row};
  }

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

  // q and the draw for one chain step: q = the processed distribution, the
  // token its argmax (temperature 0) or its exponential race with the noise.
  // With a device stop, each step keeps its FactsRow after q's columns
  // (ChainTree splits them).
  static ChainPick Pick(const BuildRequest& request) {
    const SamplingParams sampling = request.sampling;
    if (request.device_stop != nullptr) {
      switch (request.policy->draft_row()) {
        case DraftRow::kNone:
          return PickWithFacts<DraftRow::kNone>(sampling, request.generator);
        case DraftRow::kLogProbs:
          return PickWithFacts<DraftRow::kLogProbs>(sampling, request.generator);
        case DraftRow::kHidden:
          return PickWithHiddenFacts(sampling, request.generator);
      }
    }
    // At temperature 0 q is the one-hot of the argmax, exactly the law of an
    // argmax draft; no rows are kept (DraftTree::draft_probs).
    return tree_builders::SamplingPick(sampling, request.generator);
  }

  template <DraftRow kRow>
  static ChainPick PickWithFacts(const SamplingParams& sampling, at::Generator* generator) {
    if (sampling.greedy()) {
      return ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
        const at::Tensor token = GreedyTokens(logits);
        return std::make_pair(token, FactsRow(logits, at::Tensor(), token, kRow));
      });
    }
    return ChainPick::Of(
        [](const tree_builders::WarpParams& warp, const at::Tensor& logits, const at::Tensor& noise) {
          const auto [token, q] = tree_builders::WarpedDraw(warp, logits, noise);
          return std::make_pair(token, at::cat({q, FactsRow(logits, q, token, kRow)}, 1));
        },
        tree_builders::WarpOf(sampling), generator);
  }

  // PickWithFacts for a policy that reads the drafter's hidden states.
  static ChainPick PickWithHiddenFacts(const SamplingParams& sampling, at::Generator* generator) {
    if (sampling.greedy()) {
      return ChainPick::OnHidden(
          [](const std::tuple<>&, const at::Tensor& logits, const at::Tensor& hidden, const at::Tensor&) {
            const at::Tensor token = GreedyTokens(logits);
            return std::make_pair(token, FactsRow(logits, at::Tensor(), token, DraftRow::kHidden, hidden));
          });
    }
    return ChainPick::OnHidden(
        [](const tree_builders::WarpParams& warp, const at::Tensor& logits, const at::Tensor& hidden,
           const at::Tensor& noise) {
          const auto [token, q] = tree_builders::WarpedDraw(warp, logits, noise);
          return std::make_pair(token, at::cat({q, FactsRow(logits, q, token, DraftRow::kHidden, hidden)}, 1));
        },
        tree_builders::WarpOf(sampling), generator);
  }

  // The chain from DeviceDrafter::DraftChain, or nullopt where the drafter has none.
  static absl::StatusOr<std::optional<DraftTree>> BuildOnDevice(Drafter& drafter, const BuildRequest& request,
                                                                int length) {
    DeviceDrafter* device = DeviceFormOf(drafter);
    if (device == nullptr) return std::nullopt;
    absl::StatusOr<ChainResult> chain = device->DraftChain(length, Pick(request));
    if (chain.status().code() == absl::StatusCode::kUnimplemented) return std::nullopt;
    if (!chain.ok()) return chain.status();
    return ChainTree(request.root_token, length, *chain, DraftSampling::kIndependent);
  }

  // The draft tree of a chain the device drew: host tokens are placeholders.
  // `facts_columns` > 0: the rows end with that many facts columns
  // (PickWithFacts).
  static DraftTree ChainTree(int32_t root_token, int length, const ChainResult& chain, DraftSampling sampling,
                             int64_t facts_columns = 0) {
    DraftTree out;
    out.tree = TokenTree(root_token);
    for (int node = 0; node < length; ++node) out.tree.AddNode(node, /*token=*/-1);
    out.tokens = chain.tokens;
    at::Tensor rows = chain.rows;
    if (facts_columns > 0) {
      const int64_t width = rows.size(1) - facts_columns;
      out.draft_facts = rows.narrow(1, width, facts_columns);
      rows = width > 0 ? rows.narrow(1, 0, width) : at::Tensor();  // argmax drafts keep facts only
    }
    // The root was not drafted: its row is 0.
    if (rows.defined()) out.draft_probs = at::cat({at::zeros_like(rows.narrow(0, 0, 1)), rows});
    out.sampling = sampling;
    return out;
  }

  static absl::StatusOr<DraftTree> BuildBySampling(Drafter& drafter, const BuildRequest& request) {
    const int max_length = request.policy->MaxDraftLength();
    if (!request.policy->wants_progress() && max_length >= 1) {
      ASSIGN_OR_RETURN(std::optional<DraftTree> chain, BuildOnDevice(drafter, request, max_length));
      if (chain) return *std::move(chain);
    }
    DraftTree out;
    out.tree = TokenTree(request.root_token);
    std::vector<at::Tensor> tokens{LongsToDevice({request.root_token}, request.device)};
    std::vector<at::Tensor> rows;
    int node = 0;
    for (int depth = 1; depth <= max_length; ++depth) {
      const int node_before = node;  // the node whose logits draft this token
      ASSIGN_OR_RETURN(at::Tensor logits,
                       drafter.NextTokenLogits(out.tree, {node}, node == 0 ? at::Tensor() : tokens.back()));
      at::Tensor q = Probabilities(logits, request.sampling);
      at::Tensor token = request.sampling.greedy() ? GreedyTokens(q) : SampleRows(q, *request.generator);
      node = out.tree.AddNode(node, /*token=*/-1);  // filled in after the step's transfer
      tokens.push_back(token);
      rows.push_back(q);
      if (request.policy->wants_progress()) {
        // The token's facts in one read (those a device-side stop reads too).
        const DraftRow row = request.policy->draft_row();
        at::Tensor hidden;
        if (row == DraftRow::kHidden) {
          ASSIGN_OR_RETURN(hidden, drafter.NodeHiddenStates({node_before}));
        }
        const at::Tensor facts = FactsRow(logits, q, token, row, hidden).reshape({-1}).to(at::kCPU).contiguous();
        const float* f = facts.data_ptr<float>();
        const absl::Span<const float> rest = absl::MakeConstSpan(f + 3, facts.numel() - 3);
        const DraftProgress progress{.depth = depth, .draft_probability = f[0], .draft_entropy = f[1],
                                     .top_probability = f[2],
                                     .log_probs = row == DraftRow::kLogProbs ? rest : absl::Span<const float>(),
                                     .hidden = row == DraftRow::kHidden ? rest : absl::Span<const float>()};
        if (!request.policy->ContinueDrafting(progress)) break;
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
