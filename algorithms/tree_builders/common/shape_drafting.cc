#include "algorithms/tree_builders/common/shape_drafting.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/draft_ops.h"
#include "framework/core/status_macros.h"
#include "framework/device_transfer.h"

namespace speclab {
namespace tree_builders {

absl::StatusOr<DraftTree> DraftShape(Drafter& drafter, const BuildRequest& request, const TreeShape& shape,
                                     bool sample_without_replacement, const char* builder) {
  const bool sample = sample_without_replacement && !request.sampling.greedy();
  if (sample && request.generator == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(builder, ": sampling needs a drafting generator"));
  if (sample && shape.FirstRankGap() >= 0)
    return absl::InvalidArgumentError(absl::StrCat(builder, ": sampling without replacement needs contiguous ranks"));
  const c10::Device device = request.device;

  DraftTree out;
  out.tree = TokenTree(request.root_token);
  std::vector<int> tree_node(shape.size(), -1);  // shape node -> tree node (-1: not drafted)
  tree_node[0] = 0;
  std::vector<at::Tensor> token_parts{LongsToDevice({request.root_token}, device)};
  std::vector<at::Tensor> row_parts;  // q row of each drafted node's parent, in tree order
  int64_t vocab = 0;

  std::vector<int> level{0};  // shape nodes of the current depth that were drafted, in tree order
  at::Tensor level_tokens;    // their tokens on the device (undefined for the root level)
  for (int depth = 0; depth < shape.max_depth() && !level.empty(); ++depth) {
    std::vector<int> parents, parent_nodes;
    std::vector<int64_t> parent_rows;  // row of each parent within `level`
    for (size_t i = 0; i < level.size(); ++i) {
      if (shape.children(level[i]).empty()) continue;
      parents.push_back(level[i]);
      parent_nodes.push_back(tree_node[level[i]]);
      parent_rows.push_back(static_cast<int64_t>(i));
    }
    if (parents.empty()) break;
    at::Tensor parent_tokens =
        level_tokens.defined() ? level_tokens.index_select(0, LongsToDevice(parent_rows, device)) : at::Tensor();
    // One drafter forward for the whole level.
    ASSIGN_OR_RETURN(at::Tensor logits, drafter.NextTokenLogits(out.tree, parent_nodes, parent_tokens));
    vocab = logits.size(-1);
    int64_t width = 0;
    for (int p : parents) width = std::max<int64_t>(width, shape.RankSpan(p));
    RETURN_IF_ERROR(CheckWidth(builder, "the largest child rank + 1", width, vocab));

    // Children of the level in shape order: grouped by parent, ranks ascending.
    std::vector<int> children;
    std::vector<int64_t> flat, child_parent_row;  // flat index into the [parents, width] top-k; parent's row
    for (size_t j = 0; j < parents.size(); ++j) {
      for (int c : shape.children(parents[j])) {
        children.push_back(c);
        flat.push_back(static_cast<int64_t>(j) * width + shape.rank(c));
        child_parent_row.push_back(static_cast<int64_t>(j));
      }
    }
    const at::Tensor flat_index = LongsToDevice(flat, device);
    at::Tensor child_tokens;
    if (!sample) {
      child_tokens = BestTokens(logits.to(at::kFloat), width).tokens.reshape({-1}).index_select(0, flat_index);
    } else {
      at::Tensor q = Probabilities(logits, request.sampling);
      TopK draws = DrawWithoutReplacement(q, width, *request.generator);
      child_tokens = draws.tokens.reshape({-1}).index_select(0, flat_index);
      // The level's one host read: which draws exist (finite key, q > 0).
      const std::vector<double> keys = ReadToHost({draws.scores.reshape({-1}).index_select(0, flat_index)});
      std::vector<int64_t> kept_positions, kept_rows;
      std::vector<int> kept;
      for (size_t i = 0; i < children.size(); ++i) {
        if (!std::isfinite(keys[i])) continue;
        kept_positions.push_back(static_cast<int64_t>(i));
        kept_rows.push_back(child_parent_row[i]);
        kept.push_back(children[i]);
      }
      if (kept.size() != children.size()) {
        child_tokens = child_tokens.index_select(0, LongsToDevice(kept_positions, device));
        children = kept;
      }
      if (!children.empty()) row_parts.push_back(q.index_select(0, LongsToDevice(kept_rows, device)));
    }
    for (int c : children) tree_node[c] = out.tree.AddNode(tree_node[shape.parent(c)], /*token=*/-1);
    if (!children.empty()) token_parts.push_back(child_tokens);
    level = children;
    level_tokens = child_tokens;
  }
  out.tokens = at::cat(token_parts);
  if (sample) {
    if (!row_parts.empty()) {
      row_parts.insert(row_parts.begin(), at::zeros({1, vocab}, row_parts.front().options()));  // the root was not drawn
      out.draft_probs = at::cat(row_parts);
    }
    out.sampling = DraftSampling::kWithoutReplacement;
  } else {
    out.sampling = DraftSampling::kDeterministic;
  }
  return out;
}

}  // namespace tree_builders
}  // namespace speclab
