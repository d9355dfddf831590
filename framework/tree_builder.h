// TreeBuilder: shapes the draft tree of a step from a drafter's proposals.
// A builder that can also grow its tree from a root only the device knows
// implements its device form beside it: framework/device/device_tree_builder.h.
#ifndef SPECLAB_FRAMEWORK_TREE_BUILDER_H_
#define SPECLAB_FRAMEWORK_TREE_BUILDER_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <memory>

#include "absl/status/statusor.h"
#include "framework/core/length_policy.h"
#include "framework/core/registry.h"
#include "framework/core/token_tree.h"
#include "framework/draft_tree.h"
#include "framework/core/verifier.h"
#include "framework/drafter.h"
#include "framework/sampling.h"

namespace speclab {

class DeviceLengthStop;

struct BuildRequest {
  int32_t root_token = 0;
  SamplingParams sampling;          // the experiment's processor chain, for q
  DraftLengthPolicy* policy = nullptr;
  at::Generator* generator = nullptr;  // drafting randomness (never the verifier's)
  c10::Device device = c10::Device(c10::kCPU);  // where the drafter's tensors live
  // Chains drafted from a device root for a policy that stops token by token:
  // its device form (framework/device/device_length_stop.h), which decides
  // on the device instead of ContinueDrafting() on the host. The builder
  // keeps each token's facts (DraftTree::draft_facts) and, where the
  // drafter's device chain applies the stop (ChainPick::StoppedBy), the kept
  // length (DraftTree::kept_length). Null otherwise.
  const DeviceLengthStop* device_stop = nullptr;
};

// What a builder needs from the rest of the method; checked at config load.
// What a builder takes from the method's length policy.
enum class LengthControl {
  kNone,       // its own options shape every tree (static choices, a budget)
  kMaxLength,  // MaxDraftLength() bounds each step's depth
  kPerToken,   // that, and ContinueDrafting() after each drafted token
};

struct TreeBuilderTraits {
  bool needs_distributions = true;  // refuses token-only drafters
  bool needs_continuations = false; // refuses drafters of logits (merges Drafter::Continuations)
  bool may_branch = true;           // false: always a chain
  bool samples_tokens = false;      // q rows are a valid draft law at temperature > 0
  LengthControl length_control = LengthControl::kNone;
  // Drafts a branch per part of the drafter (Drafter::part_count()), each from
  // its own q: siblings carry different q rows. The only builders that take a
  // drafter of several parts.
  bool drafts_per_part = false;
};

class TreeBuilder {
 public:
  virtual ~TreeBuilder() = default;
  virtual TreeBuilderTraits traits() const = 0;
  virtual absl::StatusOr<DraftTree> Build(Drafter& drafter, const BuildRequest& request) = 0;
};

using TreeBuilderRegistry = Registry<TreeBuilder>;

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_TREE_BUILDER_H_
