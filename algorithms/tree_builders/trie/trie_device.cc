#include "algorithms/tree_builders/trie/trie_device.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "framework/device/kernel_launch.h"
#include "framework/model/fused_ops.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/tree_builders/trie/cuda/trie_kernel.h"
#endif

namespace speclab::tree_builders {
namespace {

struct TrieTensors {
  at::Tensor tokens, parents, depths, mask;
  at::Tensor drafted;  // [1] int64: the host's nodes past the root
};

// The ATen formula: the reference, and the path off CUDA.
TrieTensors TrieAten(const at::Tensor& root, const DeviceContinuations& candidates, int budget) {
  const int64_t k = candidates.tokens.size(0), length = candidates.tokens.size(1);
  const auto longs = candidates.tokens.options().dtype(at::kLong);
  const at::Tensor columns = at::arange(length, longs);
  const at::Tensor valid = columns.unsqueeze(0) < candidates.lengths.to(at::kLong).unsqueeze(1);  // [k, length]
  const at::Tensor tokens = at::where(valid, candidates.tokens.to(at::kLong), root);
  // shared[a][c][i]: candidates a and c start with the same i + 1 tokens.
  const at::Tensor same = (tokens.unsqueeze(1) == tokens.unsqueeze(0)) & valid.unsqueeze(1) & valid.unsqueeze(0);
  const at::Tensor shared = same.to(at::kLong).cumprod(2);
  // The first candidate sharing c's first i + 1 tokens (weights make the maximum unique).
  const at::Tensor earliest = (shared * (k - at::arange(k, longs)).view({k, 1, 1})).argmax(0);  // [k, length]
  const at::Tensor fresh = valid & (earliest == at::arange(k, longs).unsqueeze(1));
  const at::Tensor live = (fresh & (fresh.flatten().cumsum(0).view({k, length}) <= budget)).flatten();
  // Node (c, i) sits at 1 + c * length + i before the host's nodes move to
  // the front; its parent is the node of its first i tokens.
  const at::Tensor parent = at::cat({at::zeros({k, 1}, longs),
                                     1 + earliest.narrow(1, 0, length - 1) * length + columns.narrow(0, 0, length - 1)},
                                    1)
                                .flatten();
  const at::Tensor live_rank = live.to(at::kLong).cumsum(0);
  const at::Tensor dead_rank = (~live).to(at::kLong).cumsum(0) + live_rank.narrow(0, k * length - 1, 1);
  const at::Tensor zero = at::zeros({1}, longs);
  const at::Tensor place = at::cat({zero, at::where(live, live_rank, dead_rank)});  // each node's new index
  const at::Tensor moved_parent = at::where(live, place.index_select(0, parent), zero);
  const int64_t n = 1 + std::min<int64_t>(budget, k * length);
  at::Tensor out_tokens = at::empty({1 + k * length}, longs).index_copy_(0, place, at::cat({root, tokens.flatten()}));
  at::Tensor out_parents =
      at::empty({1 + k * length}, longs).index_copy_(0, place, at::cat({zero - 1, moved_parent}));
  at::Tensor out_live =
      at::empty({1 + k * length}, longs).index_copy_(0, place, at::cat({at::ones({1}, longs), live.to(at::kLong)}));
  out_tokens = out_tokens.narrow(0, 0, n);
  out_parents = out_parents.narrow(0, 0, n).contiguous();
  out_live = out_live.narrow(0, 0, n) != 0;
  // The nodes the host's trie lacks: copies of node 1 under the root.
  out_tokens = at::where(out_live, out_tokens, out_tokens.narrow(0, std::min<int64_t>(1, n - 1), 1)).contiguous();
  auto [mask, depths] = fused::TreeMask(out_parents);
  return {.tokens = out_tokens, .parents = out_parents, .depths = depths, .mask = mask,
          .drafted = live.to(at::kLong).sum().clamp_min(1).reshape({1})};
}

}  // namespace

DraftTree TrieOnDevice(const at::Tensor& root_token, const DeviceContinuations& candidates, int budget) {
  const int64_t k = candidates.tokens.size(0), length = candidates.tokens.size(1);
  const at::Tensor root = root_token.reshape({1}).to(candidates.tokens.device(), at::kLong).contiguous();
  TrieTensors tree;
#ifdef SPECLAB_WITH_CUDA
  const at::Tensor tokens = candidates.tokens.to(at::kLong).contiguous();
  const at::Tensor lengths = candidates.lengths.to(at::kLong).contiguous();
  if (kernel_launch::Longs(tokens) && kernel_launch::Longs(lengths) && kernel_launch::Longs(root) &&
      k * length <= kMaxTrieEntries && budget >= 1) {
    const c10::cuda::CUDAGuard guard(tokens.device());
    const int64_t n = 1 + std::min<int64_t>(budget, k * length);
    tree = {.tokens = at::empty({n}, tokens.options()), .parents = at::empty({n}, tokens.options()),
            .depths = at::empty({n}, tokens.options()), .mask = at::empty({n, n}, tokens.options().dtype(at::kBool)),
            .drafted = at::empty({1}, tokens.options())};
    kernel_launch::Check(
        LaunchTrieFromCandidates(tokens.data_ptr<int64_t>(), lengths.data_ptr<int64_t>(), root.data_ptr<int64_t>(),
                                 static_cast<int>(k), static_cast<int>(length), budget, tree.tokens.data_ptr<int64_t>(),
                                 tree.parents.data_ptr<int64_t>(), tree.depths.data_ptr<int64_t>(),
                                 tree.mask.data_ptr<bool>(), tree.drafted.data_ptr<int64_t>(),
                                 kernel_launch::Stream(tokens)),
        "TrieFromCandidates");
  }
#endif
  if (!tree.tokens.defined()) tree = TrieAten(root, candidates, budget);
  DraftTree draft;
  draft.tokens = tree.tokens;
  draft.sampling = DraftSampling::kDeterministic;
  draft.drafted_nodes = tree.drafted;
  draft.device_shape = DraftTree::DeviceShape{
      .parents = tree.parents, .depths = tree.depths, .mask = tree.mask, .depth_bound = length, .branching_bound = -1};
  return draft;
}

}  // namespace speclab::tree_builders
