// `multi_sample`: k draft sequences of the length policy's length, sampled
// from the drafter's warped q and merged into one tree (SpecTr, SpecInfer
// with one drafter, Khisti; docs/algorithms.md §1.5, §1.7, §1.8).
//
//   tree_builder: {type: multi_sample, k: 4}                     # i.i.d.: specinfer, rrs, spectr, khisti
//   tree_builder: {type: multi_sample, k: 4, replacement: false} # rrs_wor, traversal
//
// The layout and its exact law are in sequence_trie.h: with replacement the
// children of every node are i.i.d. draws from that node's q (repeated draws
// kept as separate leaves, kIndependent); without replacement the siblings
// are draws without replacement (kWithoutReplacement). draft_probs row i is
// the unmasked q row node i was drawn from (its parent's).
//
// On the device (a drafter with DeviceDrafter::DraftLevels; ModelDrafter on
// CUDA: one graph for the whole tree, and pipelined steps): the k sequences
// are the levels' k fed nodes, each drawing its next token from its own row
// (a repeated draw's context is its first's, so its row is the same q), and
// the trie's parents are worked out there, level by level: a draw's parent is
// the first node of the level before holding its sequence's prefix. Every
// draw is a node (1 + k * length of them); without replacement a draw past
// q's support stays as a zero-q node, which the q-based rules reject without
// touching the residual.
// On the host otherwise: one drafter forward per level over the distinct
// nodes holding a sequence, and one device-to-host read per level of the
// drawn tokens (the next level's shape depends on which draws coincide).
// At temperature 0 with replacement all k draws coincide, so one sequence is
// drafted: the k-1 copies could only be rejected with probability 1. Without
// replacement a one-hot q admits a single draw anyway. The length policy's
// MaxDraftLength() is read once per step; ContinueDrafting() is not used.
#include <ATen/ATen.h>

#include <cfloat>
#include <cmath>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/multi_sample/sequence_trie.h"
#include "algorithms/tree_builders/multi_sample/trie_level.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_tree_builder.h"
#include "framework/device_transfer.h"
#include "framework/model/fused_ops.h"
#include "framework/sampling.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

using tree_builders::SequenceTrie;

constexpr char kName[] = "multi_sample";

class MultiSampleTreeBuilder final : public TreeBuilder, public DeviceTreeBuilder {
 public:
  MultiSampleTreeBuilder(int k, bool replacement) : k_(k), replacement_(replacement) {}

  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = k_ > 1, .samples_tokens = true,
            .length_control = LengthControl::kMaxLength};
  }

  absl::StatusOr<DraftTree> BuildAt(Drafter& drafter, const BuildRequest& request, const DeviceRoot& root) override {
    ASSIGN_OR_RETURN(std::optional<DraftTree> grown, GrowOnDevice(drafter, request, &root));
    if (!grown) return absl::UnimplementedError("the drafter has no device-rooted tree levels");
    return *std::move(grown);
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    if (request.generator == nullptr) return absl::InvalidArgumentError("multi_sample: no drafting generator");
    ASSIGN_OR_RETURN(std::optional<DraftTree> grown, GrowOnDevice(drafter, request));
    if (grown) return *std::move(grown);
    const c10::Device device = request.device;
    const int k = replacement_ && request.sampling.greedy() ? 1 : k_;
    SequenceTrie trie(request.root_token, k);
    std::vector<at::Tensor> rows;
    int64_t vocab = 0;
    const int length = request.policy->MaxDraftLength();
    for (int depth = 1; depth <= length; ++depth) {
      const std::vector<int> frontier = trie.Frontier();
      if (frontier.empty()) break;
      ASSIGN_OR_RETURN(at::Tensor logits, drafter.NextTokenLogits(trie.tree(), frontier));
      vocab = logits.size(-1);
      at::Tensor q = Probabilities(logits, request.sampling);
      std::vector<std::vector<int32_t>> draws(frontier.size());
      if (replacement_) {
        std::vector<int64_t> row_of_sequence;  // grouped by frontier node, sequence order within
        for (size_t f = 0; f < frontier.size(); ++f)
          for (size_t i = 0; i < trie.SequencesAt(frontier[f]).size(); ++i) row_of_sequence.push_back(f);
        at::Tensor tokens = SampleRows(q.index_select(0, LongsToDevice(row_of_sequence, device)), *request.generator);
        const std::vector<double> host = tree_builders::ReadToHost({tokens});  // the level's one read
        for (size_t i = 0; i < host.size(); ++i) draws[row_of_sequence[i]].push_back(static_cast<int32_t>(host[i]));
      } else {
        int64_t width = 0;
        for (int node : frontier) width = std::max<int64_t>(width, trie.SequencesAt(node).size());
        width = std::min(width, vocab);  // no row has more draws than tokens
        tree_builders::TopK top = tree_builders::DrawWithoutReplacement(q, width, *request.generator);
        const std::vector<double> host = tree_builders::ReadToHost({top.tokens, top.scores});  // the level's one read
        const size_t scores_at = frontier.size() * width;
        for (size_t f = 0; f < frontier.size(); ++f) {
          const int64_t wanted = std::min<int64_t>(width, trie.SequencesAt(frontier[f]).size());
          for (int64_t j = 0; j < wanted; ++j) {
            const size_t at = f * width + j;
            if (!std::isfinite(host[scores_at + at])) break;  // past q's support: no such draw
            draws[f].push_back(static_cast<int32_t>(host[at]));
          }
        }
      }
      ASSIGN_OR_RETURN(std::vector<int> parent_position, trie.Extend(draws));
      if (parent_position.empty()) break;
      std::vector<int64_t> source(parent_position.begin(), parent_position.end());
      rows.push_back(q.index_select(0, LongsToDevice(source, device)));
    }
    DraftTree out;
    out.tree = trie.tree();
    out.tokens = tree_builders::TokensToDevice(out.tree.tokens(), device);
    if (!rows.empty()) {
      rows.insert(rows.begin(), at::zeros({1, vocab}, rows.front().options()));  // the root was not drawn
      out.draft_probs = at::cat(rows);
    }
    out.sampling = replacement_ ? DraftSampling::kIndependent : DraftSampling::kWithoutReplacement;
    return out;
  }

 private:
  // The trie as DeviceDrafter::DraftLevels's levels: nullopt, having fed
  // nothing, where the drafter has none (DraftLevelsAt with `root`), or for
  // drafts of one token (no level to feed).
  absl::StatusOr<std::optional<DraftTree>> GrowOnDevice(Drafter& drafter, const BuildRequest& request,
                                                        const DeviceRoot* root = nullptr) {
    if (request.generator == nullptr) return absl::InvalidArgumentError("multi_sample: no drafting generator");
    const int64_t length = request.policy->MaxDraftLength();
    DeviceDrafter* device = DeviceFormOf(drafter);
    if (device == nullptr || length < 2) return std::nullopt;
    // At temperature 0 one sequence, as on the host: the draws would all coincide, or past a one-hot q not exist.
    const int64_t k = request.sampling.greedy() ? 1 : k_;
    for (LanguageModel* model : drafter.models())
      if (!replacement_) RETURN_IF_ERROR(tree_builders::CheckWidth(kName, "k", k, model->config().vocab_size));
    // Carry: the node each sequence sits at, which fed row holds that node's
    // context (its first sequence's: every sequence at a node draws from that
    // one row, so siblings share their q row exactly), the draft's buffers,
    // filled level by level: the draws [k * length], the tree's parents
    // [1 + k * length] (the root's -1 first) and the q rows the draws were
    // drawn from [1 + k * length, vocab] (row 0 the root's zeros), and the
    // fed rows' parents past level 0 (sequence i extends fed row i). The last
    // level keeps the buffers and the tree's ancestor mask and depths.
    using Params = std::tuple<int64_t, int64_t, int64_t, double, int64_t, double>;  // k, length, joint, the warp
    const SamplingParams& warp = request.sampling;
    const LevelPick pick = LevelPick::Sampled(
        k,
        [](const Params& p, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry,
           const at::Tensor& noise) {
          const auto& [k, length, joint, temperature, top_k, top_p] = p;
          const auto longs = logits.options().dtype(at::kLong);
          std::vector<at::Tensor> buffers;
          if (level == 0) {
            buffers = {at::empty({k * length}, longs), at::empty({1 + k * length}, longs),
                       at::empty({1 + k * length, logits.size(1)}, logits.options().dtype(at::kFloat)),
                       at::arange(k, longs)};
            buffers[2].narrow(0, 0, 1).zero_();
          } else {
            buffers.assign(carry.begin() + 2, carry.end());
          }
          // Each draw's q row (at the root its one row), written where the
          // draft keeps them, and its race: one launch where the warp allows.
          const SamplingParams warp{.temperature = temperature, .top_k = top_k, .top_p = top_p};
          const at::Tensor fed_rows = level == 0 ? at::zeros({k}, longs) : carry[1];
          const at::Tensor q = buffers[2].narrow(0, 1 + level * k, k);
          at::Tensor tokens;
          if (level == 0 && joint != 0) {
            // Without replacement the root's k draws are made together
            // (Gumbel-top-k, the race's first k places), and every sibling
            // keeps the root's row.
            tokens = WarpAndRaceRanks(logits, at::Tensor(), warp, noise.narrow(0, 0, 1), q.narrow(0, 0, 1), k)
                         .reshape({-1});
            q.narrow(0, 1, k - 1).copy_(q.narrow(0, 0, 1).expand({k - 1, q.size(1)}));
          } else {
            tokens = WarpAndRace(logits, fed_rows, warp, noise, q);
          }
          const tree_builders::TrieLevel trie = tree_builders::RecordTrieLevel(
              tokens, level == 0 ? at::Tensor() : carry[0], level, buffers[0], buffers[1]);
          // The drafter's levels: each sequence extends its own node.
          LevelPick::Choice choice{.tokens = tokens, .parents = level == 0 ? fed_rows : buffers[3]};
          if (level + 1 < length) {
            choice.carry = {trie.node, trie.first, buffers[0], buffers[1], buffers[2], buffers[3]};
          } else {
            auto [mask, depths] = fused::TreeMask(buffers[1]);
            choice.kept = {buffers[0], buffers[1], depths, mask, buffers[2]};
          }
          return choice;
        },
        Params{k, length, replacement_ ? 0 : 1, warp.temperature, warp.top_k, warp.top_p}, request.generator);
    const int levels = static_cast<int>(length - 1);
    absl::StatusOr<LevelsKept> kept =
        root != nullptr ? device->DraftLevelsAt(*root, levels, pick) : device->DraftLevels(levels, pick);
    if (kept.status().code() == absl::StatusCode::kUnimplemented) return std::nullopt;
    if (!kept.ok()) return kept.status();
    const std::vector<at::Tensor>& drafted = kept->back();
    const c10::Device on = request.device;
    const at::Tensor root_token =
        root != nullptr ? root->last_two.narrow(0, 1, 1).to(on) : LongsToDevice({request.root_token}, on);
    DraftTree draft;
    draft.tree = TokenTree(request.root_token);
    draft.tokens = at::cat({root_token, drafted[0]});
    draft.draft_probs = drafted[4];
    draft.sampling = replacement_ ? DraftSampling::kIndependent : DraftSampling::kWithoutReplacement;
    // A node's children are the draws that continue its prefix: at most one a sequence.
    draft.device_shape = DraftTree::DeviceShape{.parents = drafted[1],
                                                .depths = drafted[2],
                                                .mask = drafted[3],
                                                .depth_bound = length,
                                                .branching_bound = k};
    return draft;
  }

  int k_;
  bool replacement_;
};

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "k sampled draft sequences merged into a tree; i.i.d. (specinfer/rrs/spectr/khisti) or "
                   "without replacement (rrs_wor) per node",
    .lossless = "-",
    .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<TreeBuilder>> {
      ASSIGN_OR_RETURN(int64_t k, options.GetInt("k", 4));
      if (k < 1 || k > 256) return options.Error("k", "expected a number of sequences in [1, 256]");
      ASSIGN_OR_RETURN(bool replacement, options.GetBool("replacement", true));
      return std::unique_ptr<TreeBuilder>(
          std::make_unique<MultiSampleTreeBuilder>(static_cast<int>(k), replacement));
    },
});

}  // namespace
}  // namespace speclab
