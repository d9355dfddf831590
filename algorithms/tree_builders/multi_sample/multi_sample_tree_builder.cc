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
// Cost: one drafter forward per level over the distinct nodes holding a
// sequence, and one device-to-host read per level of the drawn tokens (the
// next level's shape depends on which draws coincide). At temperature 0
// with replacement all k draws coincide, so one sequence is drafted: the
// k-1 copies could only be rejected with probability 1. Without replacement
// a one-hot q admits a single draw anyway. The length policy's
// MaxDraftLength() is read once per step; ContinueDrafting() is not used.
#include <ATen/ATen.h>

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "algorithms/tree_builders/multi_sample/sequence_trie.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

using tree_builders::SequenceTrie;

constexpr char kName[] = "multi_sample";

class MultiSampleTreeBuilder final : public TreeBuilder {
 public:
  MultiSampleTreeBuilder(int k, bool replacement) : k_(k), replacement_(replacement) {}

  TreeBuilderTraits traits() const override {
    return {.needs_distributions = true, .may_branch = k_ > 1, .samples_tokens = true,
            .length_control = LengthControl::kMaxLength};
  }

  absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) override {
    if (request.generator == nullptr) return absl::InvalidArgumentError("multi_sample: no drafting generator");
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
