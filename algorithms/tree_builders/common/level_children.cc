#include "algorithms/tree_builders/common/level_children.h"

#include <ATen/ATen.h>

#include "framework/device/kernel_launch.h"

#ifdef SPECLAB_WITH_CUDA
#include "algorithms/tree_builders/common/cuda/level_children.h"
#endif

namespace speclab::tree_builders {
at::Tensor GatherLevelChildrenAten(const LevelGather& level) {
  at::Tensor children = level.children, q_rows = level.q_rows;  // handles on the caller's buffers
  at::index_select_out(children, level.by_rank, 0, level.flat);
  if (level.q.defined()) at::index_select_out(q_rows, level.q, 0, level.parent_rows);
  return level.feed.defined() ? level.children.index_select(0, level.feed)
                              : at::zeros({level.width}, level.children.options());
}

at::Tensor GatherLevelChildren(const LevelGather& level) {
#ifdef SPECLAB_WITH_CUDA
  const int64_t count = level.flat.numel();
  const bool sampled = level.q.defined();
  using kernel_launch::Longs;
  if (Longs(level.by_rank) && Longs(level.flat) && Longs(level.children) &&
      level.children.numel() == count && count >= 1 && count <= 65535 && level.width <= 1024 &&
      (!level.feed.defined() || (Longs(level.feed) && level.feed.numel() == level.width)) &&
      (!sampled || (kernel_launch::FloatRows(level.q) && kernel_launch::FloatRows(level.q_rows) &&
                    Longs(level.parent_rows) && level.parent_rows.numel() == count &&
                    level.q_rows.size(0) == count && level.q_rows.size(1) == level.q.size(1)))) {
    at::Tensor fed = at::empty({level.width}, level.children.options());
    kernel_launch::Check(
        level_children_kernels::LaunchLevelChildren(
            level.by_rank.data_ptr<int64_t>(), level.flat.data_ptr<int64_t>(), level.children.data_ptr<int64_t>(),
            count, sampled ? level.q.data_ptr<float>() : nullptr,
            sampled ? level.parent_rows.data_ptr<int64_t>() : nullptr,
            sampled ? level.q_rows.data_ptr<float>() : nullptr, sampled ? level.q.size(1) : 0,
            level.feed.defined() ? level.feed.data_ptr<int64_t>() : nullptr, fed.data_ptr<int64_t>(), level.width,
            kernel_launch::Stream(level.children)),
        "fixed-shape tree level");
    return fed;
  }
#endif
  return GatherLevelChildrenAten(level);
}

}  // namespace speclab::tree_builders
