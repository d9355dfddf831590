// Drafting a fixed TreeShape on the device: the device form of
// shape_drafting.h's DraftShape, with the same tree, the same node order and
// the same law.
//
// Depth d's children are chosen from the drafter's q at their parents, all of
// depth d - 1 at once, so the shape is grown as DeviceDrafter::DraftLevels's
// levels (ModelDrafter on CUDA: one CUDA graph for the whole tree): level l
// feeds the depth-l nodes that have children, padded to the widest such
// depth by repeating one of them (the padding's logits are never read), and
// its pick takes each fed row's ranks: the top-k tokens by the drafter's
// logits, or Gumbel-top-k draws without replacement from the warped q (the
// exponential race on the level's noise). A draw past q's support (fewer
// tokens with q > 0 than ranks) is kept rather than dropped, so that the
// shape stays fixed: its q_j(x) is 0, so rrs_wor and traversal reject it
// without touching the residual, and no rule reaches its subtree: the law
// is unchanged. Nothing is read back: the draft's shape is on the device
// (DraftTree::DeviceShape).
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_LEVELS_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_LEVELS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "algorithms/tree_builders/common/tree_shape.h"
#include "framework/device/device_drafter.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace tree_builders {

class ShapeLevels {
 public:
  // The plan for `shape`; sampled shapes need contiguous ranks (as DraftShape).
  ShapeLevels(const TreeShape& shape, bool sample_without_replacement);

  // The draft, or nullopt (having fed nothing) where this shape or drafter
  // has no device levels: a shape of depth 1 (no level to feed), a drafter
  // without DeviceDrafter::DraftLevels (DraftLevelsAt where `root` is given:
  // the pipelined engine's step). `builder` names the caller in errors.
  absl::StatusOr<std::optional<DraftTree>> Draft(Drafter& drafter, const BuildRequest& request, const char* builder,
                                                 const DeviceRoot* root = nullptr);

 private:
  // The plan's index tensors on one device, made on first use there.
  struct OnDevice {
    c10::Device device = c10::Device(c10::kCPU);
    at::Tensor flat;          // per child, level by level: its parent's row in the level * rank_span + its rank
    at::Tensor parent_rows;   // per child: its parent's row in the level's fed nodes
    at::Tensor feed;          // [levels - 1, width]: the children of level l fed at level l + 1, padded
    at::Tensor feed_parents;  // [levels - 1, width]: their parents' rows in level l
    at::Tensor parents, depths, mask;  // the tree (DraftTree::DeviceShape)
  };
  const OnDevice& On(c10::Device device);
  // The levels' pick for these inputs, made again only when they change (its
  // key is derived from every parameter: not a per-step cost).
  struct PickInputs {
    c10::Device device = c10::Device(c10::kCPU);
    bool sample = false;
    double temperature = 0;
    int64_t top_k = 0;
    double top_p = 1;
    at::Generator* generator = nullptr;
    bool operator==(const PickInputs& o) const {
      return device == o.device && sample == o.sample && temperature == o.temperature && top_k == o.top_k &&
             top_p == o.top_p && generator == o.generator;
    }
  };
  const LevelPick& PickFor(const OnDevice& on, const BuildRequest& request, bool sample);

  bool sample_;
  int64_t depth_;      // the shape's depth D: D picks, D - 1 fed levels
  int64_t width_ = 1;  // fed nodes a level, padding included
  int64_t rank_span_ = 1;
  std::vector<int64_t> offsets_;  // children of depth d + 1 are [offsets_[d], offsets_[d + 1])
  std::vector<int64_t> flat_, parent_rows_, feed_, feed_parents_, parents_;
  std::optional<OnDevice> on_device_;
  std::optional<LevelPick> pick_;
  PickInputs pick_inputs_;
};

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SHAPE_LEVELS_H_
