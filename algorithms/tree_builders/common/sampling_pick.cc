#include "algorithms/tree_builders/common/sampling_pick.h"

#include <ATen/ATen.h>

#include <tuple>
#include <utility>

namespace speclab::tree_builders {

WarpParams WarpOf(const SamplingParams& sampling) { return {sampling.temperature, sampling.top_k, sampling.top_p}; }

std::pair<at::Tensor, at::Tensor> WarpedDraw(const WarpParams& warp, const at::Tensor& logits,
                                             const at::Tensor& noise) {
  const auto& [temperature, top_k, top_p] = warp;
  const at::Tensor q = at::empty(logits.sizes(), logits.options().dtype(at::kFloat));
  const at::Tensor token =
      WarpAndRace(logits, at::Tensor(), {.temperature = temperature, .top_k = top_k, .top_p = top_p}, noise, q);
  return {token, q};
}

ChainPick SamplingPick(const SamplingParams& sampling, at::Generator* generator) {
  if (sampling.greedy()) {
    return ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
             return std::make_pair(GreedyTokens(logits), at::Tensor());
           })
        .RowWise();
  }
  return ChainPick::Of(WarpedDraw, WarpOf(sampling), generator).RowWise();
}

}  // namespace speclab::tree_builders
