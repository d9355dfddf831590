// Drafter: proposes tokens continuing a tree node. Tree builders decide which.
//
// Two kinds exist, declared by kind():
//  - kDistributions: NextTokenLogits() gives the drafter's logits after any
//    node of the current tree (an independent small LM, EAGLE, Medusa heads).
//    The tree builder turns them into q with the experiment's sampling chain
//    and either samples (q is a valid draft law) or picks top-k (it is not).
//  - kTokensOnly: Continuation() proposes tokens with no distribution
//    (prompt lookup, retrieval). Verifiers that need q refuse these.
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

namespace speclab {

enum class DrafterKind { kDistributions, kTokensOnly };

// A step's root when only the device knows it (the engine's pipelined
// steps, which queue a step before reading the previous one back).
struct DeviceRoot {
  at::Tensor last_two;      // [2] int64: the token before the root, then the root
  DevicePosition position;  // of last_two[0]; the root's position is one more
  // Pipelined trees only (undefined for chains): every token of the
  // generation by position, int64 [>= position.max_start + 2] on the device,
  // valid up to the root; what lies past the root is stale.
  at::Tensor context;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual DrafterKind kind() const = 0;

  // Starts a generation: `prompt` is the whole prompt (the root is its last
  // token). Drafters with a cache prefill it here: the engine times Reset()
  // with the target's prefill, not as drafting.
  virtual absl::Status Reset(absl::Span<const int32_t> prompt) = 0;

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

  // kDistributions, optional: drafts a chain of `length` tokens after the
  // root (the context's last token) without the host in between: token i + 1
  // = pick(logits after token i), as LanguageModel::ForwardChain. Called
  // right after BeginStep; the chain's nodes 0..length-1 then count as listed
  // to NextTokenLogits (for EndStep), node i at depth i. Returns tokens
  // [length + 1] (root first) and pick's rows [length, vocab].
  // Unimplemented where the drafter has no such path (the default): tree
  // builders then draft token by token.
  virtual absl::StatusOr<ChainResult> DraftChain(int length, const ChainPick& pick);

  // kDistributions, optional: a tree grown on the device, as
  // LanguageModel::ForwardLevels, so that builders choosing each level from
  // the one before never wait for the host. Called right after BeginStep: the
  // drafter feeds the context its cache lacks and the root as the prefix
  // (ModelDrafter: levels + 2 tokens where the context allows, re-feeding
  // cached context, so that one graph serves every step);
  // pick gets the root's logits [1, target vocab] at level 0, each level's
  // [width, target vocab] after, and chooses in the target vocabulary.
  // Returns each level's kept tensors (level 0 first). Only the root counts
  // as a fed node of the step's tree (EndStep keeps no level node).
  // Unimplemented where the drafter has no such path (the default): builders
  // then read each level back to the host.
  virtual absl::StatusOr<LevelsKept> DraftLevels(int levels, const LevelPick& pick);

  // kDistributions, optional: DraftChain for pipelined decoding, where the
  // root and its position are on the device and no BeginStep/EndStep frame
  // the step. The drafter's cache must hold the context up to the token
  // before last_two[0] (as after Reset with the prompt, or after the previous
  // pipelined chain with any of its drafts accepted); the caller tracks that.
  // Returns tokens [length + 1] (root first) and pick's rows [length, vocab].
  // Unimplemented where the drafter has no such path (the default): the engine
  // then runs its step-by-step loop. A later BeginStep or Reset starts over.
  virtual absl::StatusOr<ChainResult> DraftChainAt(const DeviceRoot& root, int length, const ChainPick& pick);

  // kDistributions, optional: DraftLevels for pipelined trees, rooted at a
  // token only the device knows, with DraftChainAt's contract and
  // root.context defined. Where root.position.min_start is too small for
  // the drafter's fixed shape, or the drafter has no such path (the
  // default), Unimplemented: the engine then runs its step-by-step loop.
  virtual absl::StatusOr<LevelsKept> DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick);

  // kTokensOnly only: up to `max_tokens` tokens continuing path(node).
  virtual absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens);

  // kTokensOnly, optional: a continuation of exactly `length` tokens after a
  // root only the device knows, for pipelined decoding (as DraftChainAt, and
  // with its contract: the drafter has seen the context up to the token
  // before last_two[0], as after Reset with the prompt or after the previous
  // ContinuationAt with any of its drafts accepted). One fixed length, so
  // where Continuation() would give fewer tokens the drafter fills the rest
  // by a deterministic rule of its own; any such rule keeps the law (the
  // drafts are a function of the context). Returns tokens [length + 1] int64
  // on the device, root first. Unimplemented (the default): the engine then
  // runs its step-by-step loop.
  virtual absl::StatusOr<at::Tensor> ContinuationAt(const DeviceRoot& root, int length);

  // Ends a step: `accepted_path` holds the accepted node indices root first;
  // the next step's context is their tokens followed by the extra token.
  virtual absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path) = 0;

  // The models this drafter runs, so that their forwards can be counted and
  // costed (none for model-free drafters).
  virtual std::vector<LanguageModel*> models() { return {}; }
};

// What drafters may use when they are built from a config.
struct DrafterEnvironment {
  LanguageModel* target = nullptr;  // the target model (for self-speculative or head drafters)
  c10::Device device = c10::Device(c10::kCPU);
  at::ScalarType dtype = at::kFloat;
  int64_t kv_capacity = 4096;
  uint64_t seed = 0;
};

using DrafterRegistry = Registry<Drafter, const DrafterEnvironment&>;

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DRAFTER_H_
