// Trees that are grown larger than they are kept (`dynamic_topk`, `best_first`).
//
// These builders feed the drafter a growing candidate tree, then keep only
// the best candidates and re-index them. The drafter keys its per-step state
// by node index (which slot holds which fed node), and the engine hands
// Drafter::EndStep the returned tree, so an index of the returned tree must
// never name a different node the drafter was fed. ScratchTree therefore
// reserves indices 1..reserved as placeholder children of the root that are
// never fed: every non-root index of a returned tree of at most reserved + 1
// nodes names an unfed node, and the drafter keeps none of the step's
// drafted slots. It re-feeds the accepted tokens as pending context in the
// next step's first forward, which it runs anyway: no extra forward.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_PRUNED_TREE_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_PRUNED_TREE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/core/token_tree.h"
#include "framework/device/device_drafter.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace tree_builders {

// A root with `reserved` placeholder children (token 0) that must never be
// listed in Drafter::NextTokenLogits. Fed nodes get indices > reserved.
TokenTree ScratchTree(int32_t root_token, int reserved);

// One grown candidate. Candidates are stored in the order they were grown,
// which is topological: a parent precedes its children.
struct Candidate {
  int parent = -1;  // candidate index, or -1 for the root
  int32_t token = 0;
  double score = 0;  // cumulative log-probability (higher is better)
  int scratch_node = -1;  // index in the scratch tree once fed, else -1
};

// The `keep` best candidates by score; ties go to the earlier candidate, so
// a parent (never scored below its children) always ranks before them.
std::vector<int> BestCandidates(const std::vector<Candidate>& candidates, int keep);

// The returned tree: the `selected` candidates in candidate order under the
// root. Fails if a selected candidate's parent is not selected.
absl::StatusOr<DraftTree> TreeFromCandidates(int32_t root_token, const std::vector<Candidate>& candidates,
                                             std::vector<int> selected, c10::Device device);

// The draft whose tree the device kept (the last level's kept tensors of
// DeviceDrafter::DraftLevels: tokens [n - 1], parents [n], depths [n] and
// mask [n, n]), rooted at request.root_token, or at root->last_two[1] where
// only the device knows the root. Deterministic; its shape stays on the
// device (DraftTree::DeviceShape), no deeper than depth_bound.
DraftTree KeptOnDevice(const BuildRequest& request, const DeviceRoot* root, const std::vector<at::Tensor>& kept,
                       int64_t depth_bound);

// `levels` levels of `pick` grown by the drafter's device form
// (DeviceDrafter::DraftLevelsAt where `root` is given, else DraftLevels),
// and the draft its last level keeps (KeptOnDevice); nullopt where the
// drafter declines them (Unimplemented), having fed nothing.
absl::StatusOr<std::optional<DraftTree>> DraftLevelsKeptOnDevice(DeviceDrafter& device, const BuildRequest& request,
                                                                 const DeviceRoot* root, int levels,
                                                                 const LevelPick& pick, int64_t depth_bound);

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_PRUNED_TREE_H_
