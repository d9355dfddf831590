#include "algorithms/tree_builders/common/top_k_frontier.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "framework/device/kernel_launch.h"
#include "framework/model/fused_ops.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/tree_builders/common/cuda/frontier_kernels.h"
#endif

namespace speclab::tree_builders {

at::Tensor BestInOrder(const at::Tensor& scores, int64_t count) {
  TORCH_CHECK(scores.dim() == 1 && scores.scalar_type() == at::kDouble, "BestInOrder: scores must be float64 [n], got ",
              scores.sizes(), " ", scores.scalar_type());
  TORCH_CHECK(count >= 1 && count <= scores.size(0), "BestInOrder: count = ", count, " outside [1, ", scores.size(0),
              "]");
#ifdef SPECLAB_WITH_CUDA
  if (scores.is_cuda() && scores.size(0) <= frontier_kernels::kMaxTreeItems) {
    const c10::cuda::CUDAGuard guard(scores.device());
    const at::Tensor in = scores.contiguous();
    at::Tensor out = at::empty({count}, scores.options().dtype(at::kLong));
    kernel_launch::Check(frontier_kernels::LaunchBestInOrder(in.data_ptr<double>(), out.data_ptr<int64_t>(), in.size(0),
                                                             count, kernel_launch::Stream(in)),
                         "BestInOrder");
    return out;
  }
#endif
  const at::Tensor best = std::get<1>(at::sort(scores, /*stable=*/true, /*dim=*/0, /*descending=*/true));
  return std::get<0>(best.narrow(0, 0, count).sort());
}

Frontier ExpandFrontier(const at::Tensor& top_scores, const at::Tensor& top_tokens, const at::Tensor& frontier_scores,
                        const at::Tensor& frontier_pool, const at::Tensor& pool_tokens, const at::Tensor& pool_parents,
                        const at::Tensor& pool_scores, int64_t offset) {
  const int64_t k = top_scores.dim() == 2 ? top_scores.size(0) : 0;
  auto is = [&](const at::Tensor& t, at::IntArrayRef sizes, at::ScalarType type) {
    return t.defined() && t.sizes() == sizes && t.scalar_type() == type && t.device() == top_scores.device();
  };
  TORCH_CHECK(k >= 1 && is(top_scores, {k, k}, at::kFloat) && is(top_tokens, {k, k}, at::kLong) &&
                  is(frontier_scores, {k}, at::kDouble) && is(frontier_pool, {k}, at::kLong),
              "ExpandFrontier: top scores float32 [k, k], tokens int64 [k, k], frontier scores float64 [k] and pool "
              "indices int64 [k] on one device");
  const int64_t pool_size = pool_tokens.dim() == 1 ? pool_tokens.size(0) : -1;
  TORCH_CHECK(offset >= 0 && offset + k * k <= pool_size && is(pool_tokens, {pool_size}, at::kLong) &&
                  is(pool_parents, {pool_size}, at::kLong) && is(pool_scores, {pool_size}, at::kDouble),
              "ExpandFrontier: pool tokens, parents (int64) and scores (float64) [P] must hold offset ", offset,
              " + ", k * k, " entries");
#ifdef SPECLAB_WITH_CUDA
  const bool contiguous = top_scores.is_contiguous() && top_tokens.is_contiguous() && frontier_scores.is_contiguous() &&
                          frontier_pool.is_contiguous() && pool_tokens.is_contiguous() &&
                          pool_parents.is_contiguous() && pool_scores.is_contiguous();
  if (top_scores.is_cuda() && contiguous && k <= 32) {
    const c10::cuda::CUDAGuard guard(top_scores.device());
    const auto longs = frontier_pool.options();
    Frontier next{.tokens = at::empty({k}, longs), .rows = at::empty({k}, longs),
                  .scores = at::empty({k}, frontier_scores.options()), .pool = at::empty({k}, longs)};
    kernel_launch::Check(
        frontier_kernels::LaunchExpandFrontier(
            top_scores.data_ptr<float>(), top_tokens.data_ptr<int64_t>(), frontier_scores.data_ptr<double>(),
            frontier_pool.data_ptr<int64_t>(), pool_tokens.data_ptr<int64_t>(), pool_parents.data_ptr<int64_t>(),
            pool_scores.data_ptr<double>(), offset, next.tokens.data_ptr<int64_t>(), next.rows.data_ptr<int64_t>(),
            next.scores.data_ptr<double>(), next.pool.data_ptr<int64_t>(), static_cast<int>(k),
            kernel_launch::Stream(top_scores)),
        "ExpandFrontier");
    return next;
  }
#endif
  const at::Tensor tokens = top_tokens.reshape({-1});
  const at::Tensor scores = (frontier_scores.unsqueeze(1) + top_scores.to(at::kDouble)).reshape({-1});
  pool_tokens.narrow(0, offset, k * k).copy_(tokens);
  pool_parents.narrow(0, offset, k * k).copy_(frontier_pool.unsqueeze(1).expand({k, k}).reshape({-1}));
  pool_scores.narrow(0, offset, k * k).copy_(scores);
  const at::Tensor chosen = BestInOrder(scores, k);
  return {.tokens = tokens.index_select(0, chosen), .rows = at::div(chosen, k, "floor"),
          .scores = scores.index_select(0, chosen), .pool = chosen + offset};
}

std::vector<at::Tensor> KeptInOrder(const at::Tensor& pool_tokens, const at::Tensor& pool_parents,
                                    const at::Tensor& pool_scores, int64_t kept) {
  const auto longs = pool_tokens.options().dtype(at::kLong);
  const at::Tensor selected = BestInOrder(pool_scores, kept);
  // node_of[pool index + 1]: the tree node (0: the root, the parent of pool entries without one).
  const at::Tensor node_of =
      at::zeros({pool_tokens.size(0) + 1}, longs).index_copy_(0, selected + 1, at::arange(1, kept + 1, longs));
  const at::Tensor parents =
      at::cat({at::full({1}, -1, longs), node_of.index_select(0, pool_parents.index_select(0, selected) + 1)});
  auto [mask, depths] = fused::TreeMask(parents);
  return {pool_tokens.index_select(0, selected), parents, depths, mask};
}

}  // namespace speclab::tree_builders
