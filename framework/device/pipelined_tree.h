// PipelinedTree: the device work of pipelined tree steps (pipelined_steps.h),
// for builders that choose the tree's shape on the device (dynamic_topk,
// static, sequoia and multi_sample, through DeviceDrafter::DraftLevelsAt).
//
// Everything a step leaves for the next stays on the device: the generation's
// tokens (the accepted path and the extra token are written there), the
// root's position, and the target's cache, where the accepted path's entries
// move into place (DeviceModel::CompactPathAt) instead of the host's
// Commit(). The drafter re-feeds its fixed prefix from the tokens; the
// target's forward (ForwardTreeAt) and the tree verifier's device form take
// the drafted shape as it is. So a step is queued before the previous one is
// read back, as chains are.
#ifndef SPECLAB_FRAMEWORK_DEVICE_PIPELINED_TREE_H_
#define SPECLAB_FRAMEWORK_DEVICE_PIPELINED_TREE_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/method.h"
#include "framework/model/language_model.h"
#include "framework/device/pipelined_steps.h"
#include "framework/sampling.h"

namespace speclab {

class PipelinedTree final : public PipelinedSteps {
 public:
  static constexpr int64_t kMaxTreeNodes = kMaxStepTokens;  // the target's largest static forward

  // OK where a generation of a method ChooseEngineForm pipelines as trees
  // can be: a prompt of two tokens or more; otherwise FailedPrecondition.
  // (The builder and drafter may still lack device-rooted trees, and the
  // cache room is known with the tree's size: Queue() says.)
  static absl::Status Check(absl::Span<const int32_t> prompt);

  // As PipelinedSteps'.
  PipelinedTree(DeviceModel& target, Method& method, const SamplingParams& sampling,
                absl::Span<const int32_t> prompt, int max_new_tokens, at::Generator& draft_generator,
                at::Generator& verify_generator);

  // The record, int64 [3n + 1] for a tree of n nodes: the tokens (root
  // first), the parents (-1 for the root), and the verifier's walk
  // (DeviceVerifier::VerifyTree); then, for a tree filled past what its
  // builder drafted (DraftTree::drafted_nodes), that count. Each step's tree may have its own size (a
  // builder whose size follows a length policy observing late). nullopt,
  // with the target unchanged, where the builder or drafter has no
  // device-rooted trees or, at the first step, where the tree has no drafts
  // or more than kMaxTreeNodes nodes, or the target's cache has no room for
  // the tree queued past the end; at a later step those are errors.
  absl::StatusOr<std::optional<at::Tensor>> Queue(int64_t min_root, int64_t max_root) override;
  int64_t max_advance() const override { return path_length_; }
  const char* form() const override { return "pipelined tree"; }
  absl::StatusOr<PipelinedRead> Read(const at::Tensor& host_record) const override;

 private:
  int64_t room_needed_;      // the prompt and max_new_tokens: the tree and a step's advance come on top
  int64_t queued_ = 0;       // steps queued so far
  int64_t path_length_ = 0;  // the last queued tree's root and deepest depth: the most that step advances
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_PIPELINED_TREE_H_
