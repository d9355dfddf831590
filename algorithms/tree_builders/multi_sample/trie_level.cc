#include "algorithms/tree_builders/multi_sample/trie_level.h"

#include <ATen/ATen.h>

#include "framework/device/kernel_launch.h"

#ifdef SPECLAB_WITH_CUDA
#include "algorithms/tree_builders/multi_sample/cuda/trie_level.h"
#endif

namespace speclab::tree_builders {
TrieLevel RecordTrieLevelAten(const at::Tensor& tokens, const at::Tensor& parents_in, int64_t level,
                              const at::Tensor& all_tokens, const at::Tensor& all_parents) {
  const int64_t k = tokens.size(0);
  const at::Tensor parents = parents_in.defined() ? parents_in : at::zeros({k}, tokens.options());
  const at::Tensor same =
      parents.unsqueeze(1).eq(parents.unsqueeze(0)).logical_and(tokens.unsqueeze(1).eq(tokens.unsqueeze(0)));
  const at::Tensor first = same.to(at::kByte).argmax(1);  // the first true: a draw equals itself
  all_tokens.narrow(0, level * k, k).copy_(tokens);
  all_parents.narrow(0, 1 + level * k, k).copy_(parents);
  if (level == 0) all_parents.narrow(0, 0, 1).fill_(-1);
  return {.first = first, .node = first + (1 + level * k)};
}

TrieLevel RecordTrieLevel(const at::Tensor& tokens, const at::Tensor& parents, int64_t level,
                          const at::Tensor& all_tokens, const at::Tensor& all_parents) {
#ifdef SPECLAB_WITH_CUDA
  const int64_t k = tokens.size(0);
  using kernel_launch::Longs;
  if (Longs(tokens) && Longs(all_tokens) && Longs(all_parents) && (!parents.defined() || Longs(parents)) &&
      k <= trie_level_kernels::kMaxDraws &&
      all_tokens.numel() >= (level + 1) * k && all_parents.numel() >= 1 + (level + 1) * k) {
    TrieLevel out{.first = at::empty({k}, tokens.options()), .node = at::empty({k}, tokens.options())};
    kernel_launch::Check(trie_level_kernels::LaunchTrieLevel(
                             tokens.data_ptr<int64_t>(), parents.defined() ? parents.data_ptr<int64_t>() : nullptr,
                             k, level, all_tokens.data_ptr<int64_t>(), all_parents.data_ptr<int64_t>(),
                             out.first.data_ptr<int64_t>(), out.node.data_ptr<int64_t>(), kernel_launch::Stream(tokens)),
                         "multi_sample trie level");
    return out;
  }
#endif
  return RecordTrieLevelAten(tokens, parents, level, all_tokens, all_parents);
}

}  // namespace speclab::tree_builders
