#include "experiments/draft_acceptance.h"

#include <ATen/ATen.h>

namespace speclab {

at::Tensor DraftAcceptance(const at::Tensor& target_logits, const at::Tensor& drafter_logits, double temperature) {
  if (temperature == 0) return (drafter_logits.argmax(-1) == target_logits.argmax(-1)).to(target_logits.scalar_type());
  const at::Tensor q = (drafter_logits / temperature).softmax(-1);
  const at::Tensor p = (target_logits / temperature).softmax(-1);
  return at::minimum(p, q).sum(-1).clamp(0, 1);
}

}  // namespace speclab
