#include "algorithms/tree_builders/common/draft_ops.h"

#include <ATen/ATen.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "framework/device_transfer.h"
#include "framework/model/fused_ops.h"

namespace speclab {
namespace tree_builders {

TopK BestTokens(const at::Tensor& scores, int64_t k) {
  if (scores.dim() == 2 && scores.scalar_type() == at::kFloat && k <= 32) {
    auto [values, indices] = fused::TopKRows(scores.contiguous(), at::Tensor(), k);
    return {indices, values};
  }
  auto [values, indices] = scores.topk(k, /*dim=*/-1, /*largest=*/true, /*sorted=*/true);
  return {indices, values};
}

TopK MostProbable(const at::Tensor& logits, int64_t k) {
  auto [scores, tokens] = fused::TopKLogSoftmax(logits.to(at::kFloat).contiguous(), k);
  return {tokens, scores};
}

TopK DrawWithoutReplacement(const at::Tensor& q, int64_t k, at::Generator& generator) {
  const auto options = q.options().dtype(at::kDouble);
  at::Tensor uniform = at::rand(q.sizes(), generator, options).clamp_min(std::numeric_limits<double>::min());
  at::Tensor gumbel = -(-uniform.log()).log();
  at::Tensor keys = q.to(at::kDouble).log() + gumbel;  // log 0 = -inf stays -inf
  return BestTokens(keys, k);
}

std::vector<double> ReadToHost(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& part : parts) flat.push_back(part.reshape({-1}).to(at::kDouble));
  at::Tensor host = at::cat(flat).to(at::kCPU).contiguous();  // the one synchronisation
  const double* data = host.data_ptr<double>();
  return std::vector<double>(data, data + host.numel());
}

at::Tensor TokensToDevice(const std::vector<int32_t>& tokens, c10::Device device) {
  return LongsToDevice(std::vector<int64_t>(tokens.begin(), tokens.end()), device);
}

absl::Status CheckWidth(const char* builder, const char* option, int64_t k, int64_t vocab) {
  if (k <= vocab) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(builder, ": ", option, " = ", k,
                                                 " exceeds the drafter's vocabulary of ", vocab, " tokens"));
}

}  // namespace tree_builders
}  // namespace speclab
