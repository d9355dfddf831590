// DraftTree: a step's drafted tree, as a tree builder hands it to the engine.
#ifndef SPECLAB_FRAMEWORK_DRAFT_TREE_H_
#define SPECLAB_FRAMEWORK_DRAFT_TREE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "framework/core/token_tree.h"
#include "framework/core/verifier.h"

namespace speclab {

// The drafted tree plus what the verifier needs to know about how it was drawn.
struct DraftTree {
  // Host tokens may be placeholders (-1) when drafting stayed on the device;
  // `tokens` is authoritative and the engine fills the host copy.
  TokenTree tree{0};
  at::Tensor tokens;  // [n] int64 on the drafter's device, root first
  // [n, vocab] float32 on the drafter's device: row i (i > 0) is the
  // unmasked distribution node i's token was drawn from. Undefined when the
  // builder did not sample (sampling == kDeterministic). A sampling builder
  // may leave it undefined at temperature 0, where the rows are the tokens'
  // one-hots (the engine builds them where a host rule reads them; `chain`
  // does so).
  at::Tensor draft_probs;
  DraftSampling sampling = DraftSampling::kDeterministic;
  // [n - 1, 3] float32 on the drafter's device, for chains drafted for a
  // length policy's device-side stop (BuildRequest::device_stop): each
  // drafted token's DraftProgress, in DeviceDraftFacts' column order (q of the
  // token, the drafter's own entropy and top probability), then, for a policy
  // that reads a row (DraftLengthPolicy::draft_row()), that row: the
  // drafter's own log-probabilities ([n - 1, 3 + vocab]) or its final hidden
  // state ([n - 1, 3 + hidden]). Else undefined.
  at::Tensor draft_facts;
  // [1] int64 on the drafter's device, for such chains where the drafter
  // applied the stop itself (ChainPick::StoppedBy): the drafts it keeps, 1 to
  // n - 1; past them tokens, rows and facts may be stale. Else undefined (the
  // engine then applies the stop to draft_facts).
  at::Tensor kept_length;
  // [1] int64 on the device, for trees filled to a fixed size past the nodes
  // the builder drafted (the `trie` builder's device form fills with copies
  // no walk enters): how many nodes past the root it drafted, which come
  // first and which the step's statistics count. Else undefined (every node
  // counts).
  at::Tensor drafted_nodes;

  // Set by builders that choose the tree's shape on the device, so that the
  // engine queues the target's forward without reading the draft back
  // (dynamic_topk through DeviceDrafter::DraftLevels). `tree` then holds the root
  // only; the engine reads `parents` back with the verifier's data, in the
  // step's one synchronisation, and rebuilds it (AdoptShape).
  struct DeviceShape {
    at::Tensor parents;  // [n] int64 on the device: -1 for the root, else an earlier node
    at::Tensor depths;   // [n] int64 on the device: 0 for the root
    at::Tensor mask;     // [n, n] bool on the device: row i sees node j iff j is i or an ancestor of i
    int64_t depth_bound = -1;      // what the host knows of the deepest node's depth (-1: at most n - 1)
    int64_t branching_bound = -1;  // and of the most children a node has (-1: at most n - 1)
  };
  std::optional<DeviceShape> device_shape;
};

// Nodes in the draft, root included: tree.size(), or the number of tokens
// while the shape is on the device.
int64_t DraftSize(const DraftTree& draft);

// Rebuilds draft.tree from host copies of device_shape->parents and of
// tokens, and drops device_shape. Fails, naming the node, on a parent that
// is not an earlier node.
absl::Status AdoptShape(DraftTree& draft, absl::Span<const int64_t> parents, absl::Span<const int32_t> tokens);

// AdoptShape from a read of the device (one synchronisation), for callers
// other than the engine; a no-op for a draft whose tree is on the host.
absl::Status ReadShape(DraftTree& draft);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DRAFT_TREE_H_
