// How often the target accepts a drafter's token, position by position, from
// both models' logits: what `speclab train`'s acceptance heads learn and what
// `speclab layer-search` scores layer sets by.
#ifndef SPECLAB_EXPERIMENTS_DRAFT_ACCEPTANCE_H_
#define SPECLAB_EXPERIMENTS_DRAFT_ACCEPTANCE_H_

#include <ATen/core/Tensor.h>

namespace speclab {

// target_logits, drafter_logits [n, vocab] of one floating dtype -> [n] of
// that dtype: at temperature T > 0, rejection sampling's chance of accepting
// a token drawn from the drafter's q_T, sum_v min(p_T(v), q_T(v)); at T = 0,
// 1 where the two argmaxes agree, else 0.
at::Tensor DraftAcceptance(const at::Tensor& target_logits, const at::Tensor& drafter_logits, double temperature);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_DRAFT_ACCEPTANCE_H_
