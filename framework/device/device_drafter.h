// DeviceDrafter: a drafter's device form, beside the Drafter interface.
//
// A Drafter (framework/drafter.h) proposes tokens with the host in the loop.
// One that can also draft on the device without waiting for the host
// implements this interface too (ModelDrafter: a whole chain or a tree's
// levels as one CUDA graph; PromptLookupDrafter: an n-gram kernel), and tree
// builders ask for it with DeviceFormOf(). Where it is absent, or a method
// returns Unimplemented, builders draft through Drafter and the engine steps
// on the host: the same law either way.
#ifndef SPECLAB_FRAMEWORK_DEVICE_DEVICE_DRAFTER_H_
#define SPECLAB_FRAMEWORK_DEVICE_DEVICE_DRAFTER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/device/chain_guess.h"
#include "framework/device/device_model.h"
#include "framework/device/device_riders.h"
#include "framework/target_features.h"

namespace speclab {

class DeviceGraphs;
class Drafter;

// A step's root when only the device knows it (the engine's pipelined
// steps, which queue a step before reading the previous one back).
struct DeviceRoot {
  at::Tensor last_two;      // [2] int64: the token before the root, then the root
  DevicePosition position;  // of last_two[0]; the root's position is one more
  // Every token of the generation by position, int64 [>= position.max_start
  // + 2] on the device, valid up to the root; what lies past the root is
  // stale.
  at::Tensor context;
  // For drafters that read target features (framework/target_features.h):
  // the features of the path the last step accepted, root first, ending with
  // the token before the root. Each tensor holds rows [k, hidden] (k: a
  // chain's tokens, or a tree's deepest path) of which the first
  // `path_length` ([1] int64 on the device) are the path's; at the first
  // step, the prompt's rows but the last.
  TargetFeatures target;
  at::Tensor path_length;
  // Tokens before last_two[0] that a drafter with a cache of its own must
  // feed again from `context` (0: its cache holds the context up to the
  // token before last_two[0]). A tree whose branches come from several
  // drafters (part_chains) may accept a path one of them never drafted, up
  // to this many tokens. Drafters without such a cache ignore it; one that
  // cannot feed them returns Unimplemented.
  int refeed = 0;
};

// The last-layer target feature of the token before the root ([1, hidden]:
// the last of the path rows a pipelined step hands over), for drafters that
// read it (Medusa's and Hydra's heads). Unimplemented, naming `drafter`,
// where the step handed over no features.
absl::StatusOr<at::Tensor> FeatureBeforeRoot(const DeviceRoot& root, const std::string& drafter);

// The sequence up to a device root, read to the host: context's first
// start[0] tokens, then last_two (the token before the root, the root). For
// device forms' CPU paths, which follow their kernels' rule on the host.
std::vector<int32_t> HostSequence(const at::Tensor& context, const at::Tensor& last_two, const at::Tensor& start);

// A token-only drafter's candidate continuations on the device, in one
// fixed shape: candidate c is tokens[c][0..lengths[c]) (lengths[c] = 0 where
// fewer were found); the entries past it are ids of the vocabulary (the
// root's, say) that mean nothing.
struct DeviceContinuations {
  at::Tensor tokens;   // [max_candidates, max_tokens] int64
  at::Tensor lengths;  // [max_candidates] int64
};

// Candidates found on the host (best first; the first `max_candidates`, each
// cut to `max_tokens`) in DeviceContinuations' shape on `device`, `fill` past
// each: for device forms' CPU paths.
DeviceContinuations ToDeviceContinuations(const std::vector<std::vector<int32_t>>& candidates, int max_candidates,
                                          int max_tokens, int64_t fill, c10::Device device);

class DeviceDrafter {
 public:
  virtual ~DeviceDrafter() = default;

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

  // kDistributions, optional: DraftChainAt drafted in rounds (staged
  // speculation: DeviceModel::ForwardChainInRoundsAt), `guess` guessing how
  // the chain goes on from root.context and the chain so far: the same
  // tokens and rows, fewer forwards where the guesses hit. Unimplemented
  // (the default) where the drafter has no such path.
  virtual absl::StatusOr<ChainResult> DraftChainInRoundsAt(const DeviceRoot& root, int length, const ChainPick& pick,
                                                           const ChainGuess& guess);

  // kDistributions, optional: DraftLevels for pipelined trees, rooted at a
  // token only the device knows, with DraftChainAt's contract and
  // root.context defined. Where root.position.min_start is too small for
  // the drafter's fixed shape, or the drafter has no such path (the
  // default), Unimplemented: the engine then runs its step-by-step loop.
  virtual absl::StatusOr<LevelsKept> DraftLevelsAt(const DeviceRoot& root, int levels, const LevelPick& pick);

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

  // kTokensOnly, optional: ContinuationAt's rule as a ChainGuess of `count`
  // tokens, for another drafter's chain in rounds (a cascade's proposer):
  // a function of the sequence alone, so that it may guess after any of
  // the chain's tokens. Unimplemented (the default) where the drafter's
  // continuations depend on more (tables learned online from the roots it
  // sees) or where it cannot give `count` tokens.
  virtual absl::StatusOr<ChainGuess> GuessOf(int count);

  // kTokensOnly, optional: Drafter::Continuations() of the root (up to
  // `max_candidates` continuations of up to `max_tokens` tokens, best first)
  // after a root only the device knows, with ContinuationAt's contract and
  // root.context defined, for pipelined trees (the `trie` builder).
  // Unimplemented (the default): the engine then runs its step-by-step loop.
  virtual absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                              int max_candidates);

  // Drafter::Riders() for a pipelined step, on the device: they ride in the
  // step's verification forward after the tree's nodes (or the chain's).
  // Called once a step, after its draft; none (the default) where the
  // drafter has none. A drafter with riders that drafts from device roots
  // must give them here, as lookahead does.
  virtual absl::StatusOr<DeviceRiders> RidersAt();
  // The target's logits of the step's riders ([r, vocab] float32 on the
  // device, not warped), queued after that forward, where RidersAt() gave
  // some: the drafter's state moves on there (Drafter::RidersScored and
  // EndStep's share of it) without the host.
  virtual absl::Status RidersScoredAt(const at::Tensor& logits);

  // The drafter's own device work outside any model's forward (heads,
  // picks), where it runs it through a DeviceGraphs: its runs are counted
  // per generation (Generation::draft_graph_runs) and priced as forwards
  // are. Null (the default) where drafting is model forwards alone.
  virtual DeviceGraphs* graphs() { return nullptr; }
};

// The device form of `drafter`, or null where it has none.
DeviceDrafter* DeviceFormOf(Drafter& drafter);
// The drafter's own captured device work (DeviceDrafter::graphs()), for
// counting and pricing it; null where it has none.
DeviceGraphs* DraftGraphsOf(Drafter& drafter);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_DEVICE_DRAFTER_H_
