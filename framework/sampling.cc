#include "framework/sampling.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "framework/model/fused_ops.h"

namespace speclab {

absl::Status SamplingParams::Validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    return absl::InvalidArgumentError(absl::StrCat("temperature must be a finite number >= 0, got ", temperature));
  if (top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", top_k));
  if (!(top_p > 0 && top_p <= 1)) return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", top_p));
  return absl::OkStatus();
}

at::Tensor TargetRows(const at::Tensor& logits, const SamplingParams& params) {
  return params.greedy() ? logits.to(at::kFloat) : Probabilities(logits, params);
}

at::Tensor Probabilities(const at::Tensor& logits, const SamplingParams& params) {
  at::Tensor x = logits.to(at::kFloat);
  if (params.greedy()) {
    const at::Tensor best = x.dim() == 2 ? fused::ArgmaxRows(x).unsqueeze(-1) : x.argmax(-1, /*keepdim=*/true);
    return at::zeros_like(x).scatter_(-1, best, 1.0);
  }
  const int64_t vocab = x.size(-1);
  const bool truncated = (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0;
  // Without truncation the division rides in the softmax kernel; top-k
  // alone is one fused call too (on CUDA one launch).
  if (!truncated && x.dim() == 2) return fused::SoftmaxRows(x, params.temperature);
  const bool top_k = params.top_k > 0 && params.top_k < vocab;
  if (top_k && params.top_p == 1.0 && x.dim() == 2) return fused::TopKSoftmaxRows(x, params.temperature, params.top_k);
  x = x / params.temperature;
  if (top_k) {
    // Keep every token scoring at least the k-th best (ties kept, as in HF).
    at::Tensor kth = std::get<0>(x.topk(params.top_k, -1)).narrow(-1, params.top_k - 1, 1);
    x = x.masked_fill(x < kth, -std::numeric_limits<float>::infinity());
  }
  if (params.top_p < 1.0) {
    auto [sorted, order] = x.sort(-1, /*descending=*/true);
    at::Tensor cumulative = sorted.softmax(-1).cumsum(-1);
    // Drop a token once the mass before it already reaches top_p; the first always stays.
    at::Tensor drop_sorted = (cumulative - sorted.softmax(-1)) >= params.top_p;
    at::Tensor drop = at::zeros_like(drop_sorted).scatter_(-1, order, drop_sorted);
    x = x.masked_fill(drop, -std::numeric_limits<float>::infinity());
  }
  return x.dim() == 2 ? fused::SoftmaxRows(x) : x.softmax(-1);
}

at::Tensor GreedyTokens(const at::Tensor& scores) { return fused::ArgmaxRows(scores.to(at::kFloat)); }

at::Tensor SampleRows(const at::Tensor& probs, at::Generator& generator) {
  // The exponential race: argmax_i w_i / E_i with E_i ~ Exp(1) i.i.d. picks i
  // with probability w_i / sum(w). It is what at::multinomial does for one
  // draw, minus multinomial's validity checks, which read the tensor back to
  // the host (two synchronisations per call). E is kept off 0 so that a zero
  // weight gives 0, never 0/0; ArgmaxRows divides and reduces in one pass.
  const at::Tensor rows = probs.dim() == 2 ? probs : probs.reshape({-1, probs.size(-1)});
  const at::Tensor tokens = RaceRows(rows, at::empty_like(rows).exponential_(1.0, generator));
  return probs.dim() == 2 ? tokens : tokens.reshape(probs.sizes().slice(0, probs.dim() - 1));
}

at::Tensor RaceRows(const at::Tensor& probs, const at::Tensor& noise) { return fused::ArgmaxRows(probs, noise); }

at::Tensor WarpAndRaceRanks(const at::Tensor& logits, const at::Tensor& rows, const SamplingParams& warp,
                            const at::Tensor& noise, const at::Tensor& out, int64_t ranks) {
  if (!warp.greedy() && warp.top_p == 1.0 && logits.dim() == 2) {
    const int64_t vocab = logits.size(1);
    const int64_t k = warp.top_k > 0 && warp.top_k < vocab ? warp.top_k : vocab;
    return fused::TopKSoftmaxRace(logits.to(at::kFloat), rows, warp.temperature, k, noise, out, ranks);
  }
  const at::Tensor q = Probabilities(logits, warp);
  out.copy_(rows.defined() ? q.index_select(0, rows) : q);
  return ranks == 1 ? RaceRows(out, noise).unsqueeze(1) : fused::TopKRows(out, noise, ranks).second;
}

at::Tensor WarpAndRace(const at::Tensor& logits, const at::Tensor& rows, const SamplingParams& warp,
                       const at::Tensor& noise, const at::Tensor& out) {
  return WarpAndRaceRanks(logits, rows, warp, noise, out, 1).reshape({-1});
}

at::Generator MakeGenerator(c10::Device device, uint64_t seed) {
  at::Generator generator = at::globalContext().defaultGenerator(device).clone();
  generator.set_current_seed(seed);
  return generator;
}

}  // namespace speclab
