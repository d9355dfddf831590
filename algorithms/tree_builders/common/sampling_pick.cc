#include "algorithms/tree_builders/common/sampling_pick.h"

#include <ATen/ATen.h>

#include <tuple>
#include <utility>

namespace speclab::tree_builders {

ChainPick SamplingPick(const SamplingParams& sampling, at::Generator* generator) {
  if (sampling.greedy()) {
    return ChainPick::Of([](const std::tuple<>&, const at::Tensor& logits, const at::Tensor&) {
      return std::make_pair(GreedyTokens(logits), at::Tensor());
    });
  }
  using Params = std::tuple<double, int64_t, double>;  // temperature, top_k, top_p
  return ChainPick::Of(
      [](const Params& p, const at::Tensor& logits, const at::Tensor& noise) {
        const auto& [temperature, top_k, top_p] = p;
        const at::Tensor q = at::empty(logits.sizes(), logits.options().dtype(at::kFloat));
        const at::Tensor token =
            WarpAndRace(logits, at::Tensor(), {.temperature = temperature, .top_k = top_k, .top_p = top_p}, noise, q);
        return std::make_pair(token, q);
      },
      Params{sampling.temperature, sampling.top_k, sampling.top_p}, generator);
}

}  // namespace speclab::tree_builders
