// TableDrafter: a model-free distribution drafter for tree-builder tests.
//
// Its logits after a node are a fixed pseudo-random function of the node's
// token path, so tests can recompute what a builder should have drafted.
// It also checks the Drafter contract builders rely on (a listed node's
// ancestors were listed earlier in the step, or earlier in the same call;
// tokens known on the host or given on the device) and records every
// NextTokenLogits call, so tests can count drafter forwards per step.
// Not registered: tests construct it directly.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_TESTING_TABLE_DRAFTER_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_TESTING_TABLE_DRAFTER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <vector>

#include "framework/drafter.h"

namespace speclab {
namespace tree_builders {

class TableDrafter final : public Drafter {
 public:
  // Logits are `scale` times standard normal draws seeded by (seed, path).
  TableDrafter(int64_t vocab, uint64_t seed, double scale = 3.0);

  DrafterKind kind() const override { return DrafterKind::kDistributions; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                             const at::Tensor& node_tokens) override;
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override;

  // The logits row after `path` (root first): float32 [vocab] on the CPU.
  at::Tensor Logits(const std::vector<int32_t>& path) const;

  // Nodes listed in each NextTokenLogits call of the current step.
  const std::vector<std::vector<int>>& calls() const { return calls_; }
  // Token path (root first) of every node fed this step, by node index.
  const std::map<int, std::vector<int32_t>>& fed_paths() const { return fed_; }

 private:
  int64_t vocab_;
  uint64_t seed_;
  double scale_;
  std::vector<std::vector<int>> calls_;
  std::map<int, std::vector<int32_t>> fed_;
};

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_TESTING_TABLE_DRAFTER_H_
