// Drafter: proposes tokens continuing a tree node. Tree builders decide which.
//
// Two kinds exist, declared by kind():
//  - kDistributions: NextTokenLogits() gives the drafter's logits after any
//    node of the current tree (an independent small LM, EAGLE, Medusa heads).
//    The tree builder turns them into q with the experiment's sampling chain
//    and either samples (q is a valid draft law) or picks top-k (it is not).
//  - kTokensOnly: Continuation() proposes tokens with no distribution
//    (prompt lookup, retrieval). Verifiers that need q refuse these.
//
// A drafter that can also draft without the host in the loop (whole chains
// or tree levels on the device, from a root only the device knows) implements
// its device form beside it: framework/device/device_drafter.h.
#ifndef SPECLAB_FRAMEWORK_DRAFTER_H_
#define SPECLAB_FRAMEWORK_DRAFTER_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/core/registry.h"
#include "framework/core/token_tree.h"
#include "framework/model/language_model.h"
#include "framework/target_features.h"

namespace speclab {

enum class DrafterKind { kDistributions, kTokensOnly };

// Tokens a drafter has the target score in a step's verification forward
// beside the tree, without verifying them (Drafter::Riders()): lookahead
// decoding's Jacobi window, so that one target forward drafts and verifies.
// In the forward they follow the tree's nodes. Each sees the committed
// context, the root and the riders `sees` marks (itself included), never the
// tree's drafts, and no node of the tree sees them: the tree's rows are what
// they would be without riders. The target's cache never keeps them.
struct RiderTokens {
  std::vector<int32_t> tokens;
  std::vector<int64_t> offsets;  // each rider's position minus the root's, >= 1
  std::vector<uint8_t> sees;     // [r, r] row-major: rider i attends to rider j

  int size() const { return static_cast<int>(tokens.size()); }
  // Fails, naming `drafter`, unless the three agree, every rider sees itself
  // and every token is below `vocab`.
  absl::Status Check(const std::string& drafter, int64_t vocab) const;
};

// The text a token-only drafter looks up after `node`: the committed context
// (which ends with the tree's root token) followed by the drafted tokens on
// the path from the root to `node`.
std::vector<int32_t> SequenceThrough(absl::Span<const int32_t> context, const TokenTree& tree, int node);

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual DrafterKind kind() const = 0;

  // What the drafter reads of the target besides tokens (its hidden states),
  // and when it gets them: framework/target_features.h. None by default.
  virtual TargetFeatureRequest target_features() const { return {}; }

  // Starts a generation: `prompt` is the whole prompt (the root is its last
  // token). Drafters with a cache prefill it here: the engine times Reset()
  // with the target's prefill, not as drafting. `target` holds the requested
  // features of every prompt token but the last.
  virtual absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) = 0;

  // Starts a step. `context` is every committed token, ending with the root of
  // the tree about to be built.
  virtual absl::Status BeginStep(absl::Span<const int32_t> context) = 0;

  // kDistributions only: logits [nodes.size(), vocab] float32 on the drafter's
  // device for the token after each listed node of `tree`. A node's ancestors
  // must have been listed in this or an earlier call of the same step.
  // `node_tokens` ([nodes.size()] int64 on the device), when defined, gives the
  // listed nodes' tokens: builders that sample on the device pass them so that
  // drafting never waits for the host (the tree's own tokens may then be
  // placeholders until the step's single device-to-host transfer).
  virtual absl::StatusOr<at::Tensor> NextTokenLogits(const TokenTree& tree, absl::Span<const int> nodes,
                                                     const at::Tensor& node_tokens = at::Tensor());

  // kDistributions drafters that run a model: the width of the final hidden
  // state behind their logits (the final norm's output, which the LM head
  // reads), for length policies that read it (DraftRow::kHidden); 0 where
  // the drafter gives none.
  virtual int64_t hidden_size() const { return 0; }
  // Those hidden states for `nodes`, each listed in this step's
  // NextTokenLogits() calls already: [nodes.size(), hidden_size()] float32
  // on the drafter's device. Unimplemented by default.
  virtual absl::StatusOr<at::Tensor> NodeHiddenStates(absl::Span<const int> nodes);

  // kDistributions drafters that hold several others, each with its own q
  // (a `merge` of drafters of logits): how many, and part `part`'s logits as
  // NextTokenLogits gives them. Builders that draft a branch per part read
  // them (TreeBuilderTraits::drafts_per_part), putting part p's nodes under
  // the root's p-th child; each part sees its own branch as its tree (the
  // root, then the branch's nodes in the tree's order; at EndStep also the
  // accepted path where it lies in another branch, after them). The other
  // builders refuse such a drafter when the method is loaded. One part by
  // default: the drafter itself.
  virtual int part_count() const { return 1; }
  virtual absl::StatusOr<at::Tensor> PartLogits(int part, const TokenTree& tree, absl::Span<const int> nodes,
                                                const at::Tensor& node_tokens = at::Tensor());
  // Part `part` itself, for its device form: DeviceFormOf(Part(p))->DraftChain
  // right after BeginStep drafts the part's whole branch as a chain (node i at
  // depth i, as its branch's tree numbers it). Host drafting goes through
  // PartLogits.
  virtual Drafter& Part(int part) { return *this; }

  // kTokensOnly only: up to `max_tokens` tokens continuing path(node).
  virtual absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens);

  // kTokensOnly only: up to `max_candidates` distinct non-empty
  // continuations of path(node), each of up to `max_tokens` tokens, best
  // first (a retrieval drafter's matches, which the `trie` tree builder
  // merges into a tree). By default the one Continuation(), if not empty.
  virtual absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node,
                                                                          int max_tokens, int max_candidates);

  // Riders for the step whose tree was just built; none by default. A
  // drafter with riders and a device form gives them there too
  // (DeviceDrafter::RidersAt), for pipelined steps.
  virtual absl::StatusOr<RiderTokens> Riders() { return RiderTokens(); }
  // The target's logits of the step's riders, [r, vocab] float32 on its
  // device as the forward gave them (not warped), before EndStep.
  virtual absl::Status RidersScored(const at::Tensor& logits) { return absl::OkStatus(); }

  // Ends a step: `accepted_path` holds the accepted node indices root first;
  // the next step's context is their tokens followed by the extra token.
  // `target` holds the requested features of the path's nodes, in its order.
  virtual absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                               const TargetFeatures& target) = 0;

  // The models this drafter runs, so that their forwards can be counted and
  // costed (none for model-free drafters).
  virtual std::vector<LanguageModel*> models() { return {}; }
};

// The riders of drafters that hold others (merge, cascade): each part's
// riders in turn, seeing only their own, and each part's logits back.
class RiderParts {
 public:
  absl::StatusOr<RiderTokens> Gather(absl::Span<Drafter* const> parts);
  // `logits` as RidersScored() got them, for the last Gather().
  absl::Status Scatter(absl::Span<Drafter* const> parts, const at::Tensor& logits);

 private:
  std::vector<int> sizes_;  // each part's count in the last Gather()
};

// What drafters may use when they are built from a config.
struct DrafterEnvironment {
  // The target model, for drafters built from its weights (LlamaModel::
  // ShareLayers, Embed, LmHead). Its cache and forwards are the engine's:
  // drafters read its states through target_features(), never by calling it.
  LanguageModel* target = nullptr;
  c10::Device device = c10::Device(c10::kCPU);
  at::ScalarType dtype = at::kFloat;
  int64_t kv_capacity = 4096;
  uint64_t seed = 0;
};

using DrafterRegistry = Registry<Drafter, const DrafterEnvironment&>;

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DRAFTER_H_
