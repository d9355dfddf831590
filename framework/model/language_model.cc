#include "framework/model/language_model.h"

#include <ATen/ATen.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"

namespace speclab {

namespace {

absl::StatusOr<ChainResult> ForwardEach(LanguageModel& model, const at::Tensor& first, int64_t position, int64_t steps,
                                        const ChainPick& pick) {
  if (steps < 1) return absl::InvalidArgumentError(absl::StrCat("ForwardChain: steps must be >= 1, got ", steps));
  if (!first.defined() || first.dim() != 1 || first.size(0) != 1)
    return absl::InvalidArgumentError("ForwardChain: the first token must be a [1] tensor");
  const at::Tensor noise =
      pick.noise_generator == nullptr
          ? at::Tensor()
          : at::empty({steps, model.config().vocab_size}, first.options().dtype(at::kFloat))
                .exponential_(1.0, *pick.noise_generator);
  std::vector<at::Tensor> tokens{first.to(at::kLong)}, rows;
  for (int64_t i = 0; i < steps; ++i) {
    ASSIGN_OR_RETURN(at::Tensor logits,
                     model.Forward(tokens.back(), at::full({1}, position + i, first.options().dtype(at::kLong)), at::Tensor()));
    auto [token, row] = pick.pick(logits, noise.defined() ? noise.narrow(0, i, 1) : at::Tensor());
    tokens.push_back(token.view({1}));
    if (row.defined()) rows.push_back(row);
  }
  ChainResult result{.tokens = at::cat(tokens)};
  if (!rows.empty()) result.rows = at::cat(rows);
  return result;
}

}  // namespace

absl::StatusOr<ChainResult> LanguageModel::ForwardChain(const at::Tensor& first, int64_t position, int64_t steps,
                                                        const ChainPick& pick) {
  // Picks are ATen code: their errors arrive as exceptions.
  try {
    return ForwardEach(*this, first, position, steps, pick);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardChain: ", e.what()));
  }
}

}  // namespace speclab
