#include "algorithms/tree_builders/testing/table_drafter.h"

#include <ATen/ATen.h>

#include <random>

#include "absl/strings/str_cat.h"

namespace speclab {
namespace tree_builders {

TableDrafter::TableDrafter(int64_t vocab, uint64_t seed, double scale) : vocab_(vocab), seed_(seed), scale_(scale) {}

absl::Status TableDrafter::Reset(absl::Span<const int32_t>, const TargetFeatures&) { return absl::OkStatus(); }

absl::Status TableDrafter::BeginStep(absl::Span<const int32_t>) {
  calls_.clear();
  fed_.clear();
  return absl::OkStatus();
}

at::Tensor TableDrafter::Logits(const std::vector<int32_t>& path) const {
  uint64_t h = seed_ * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  for (int32_t t : path) h = (h ^ static_cast<uint64_t>(t + 1)) * 0x100000001B3ULL;
  std::mt19937_64 engine(h);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(vocab_);
  for (float& x : row) x = static_cast<float>(scale_) * normal(engine);
  return at::tensor(row);
}

absl::StatusOr<at::Tensor> TableDrafter::NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                                         const at::Tensor& node_tokens) {
  calls_.emplace_back(nodes.begin(), nodes.end());
  at::Tensor given;
  if (node_tokens.defined()) {
    if (node_tokens.size(0) != static_cast<int64_t>(nodes.size()))
      return absl::InvalidArgumentError("node_tokens does not match nodes");
    given = node_tokens.to(at::kCPU, at::kLong).contiguous();
  }
  std::vector<at::Tensor> rows;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int node = nodes[i];
    if (node < 0 || node >= tree.size()) return absl::InvalidArgumentError(absl::StrCat("node ", node, " not in tree"));
    const int32_t token = given.defined() ? static_cast<int32_t>(given[i].item<int64_t>()) : tree.token(node);
    if (token < 0 || token >= vocab_)
      return absl::InvalidArgumentError(absl::StrCat("node ", node, " has no usable token (", token, ")"));
    std::vector<int32_t> path;
    if (node != 0) {
      auto parent = fed_.find(tree.parent(node));
      if (parent == fed_.end())
        return absl::FailedPreconditionError(absl::StrCat("node ", node, " listed before its parent ", tree.parent(node)));
      path = parent->second;
    }
    path.push_back(token);
    if (auto it = fed_.find(node); it != fed_.end() && it->second != path)
      return absl::FailedPreconditionError(absl::StrCat("node ", node, " fed twice with different paths"));
    fed_[node] = path;
    rows.push_back(Logits(path));
  }
  return at::stack(rows);
}

absl::Status TableDrafter::EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) { return absl::OkStatus(); }

}  // namespace tree_builders
}  // namespace speclab
