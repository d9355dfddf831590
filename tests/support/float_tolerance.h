// Tolerances of tensor comparisons, derived from the arithmetic they check
// (framework/core/float_bounds.h has the model and the scalar bounds).
#ifndef SPECLAB_TESTS_SUPPORT_FLOAT_TOLERANCE_H_
#define SPECLAB_TESTS_SUPPORT_FLOAT_TOLERANCE_H_

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>

#include "framework/core/float_bounds.h"
#include "framework/model/model_config.h"

namespace speclab::testing {

// The unit roundoff of a storage type.
inline double UnitRoundoff(at::ScalarType dtype) {
  switch (dtype) {
    case at::kDouble:
      return float_bounds::kFloat64Roundoff;
    case at::kHalf:
      return float_bounds::kFloat16Roundoff;
    case at::kBFloat16:
      return float_bounds::kBFloat16Roundoff;
    default:
      return float_bounds::kFloat32Roundoff;
  }
}

// Largest |got - want| / bound over the elements, compared in float64 on the
// CPU (0 where got == want, so a zero bound demands equality there): at most 1
// means every element is within its bound. NaN anywhere makes it NaN, which
// fails every `<= 1`.
inline double BoundRatio(const at::Tensor& got, const at::Tensor& want, const at::Tensor& bound) {
  const at::Tensor diff = (got.to(at::kCPU, at::kDouble) - want.to(at::kCPU, at::kDouble)).abs();
  const at::Tensor b = bound.to(at::kCPU, at::kDouble);
  const at::Tensor ratio = at::where(diff.eq(0), at::zeros_like(diff), diff / b);
  return ratio.numel() == 0 ? 0.0 : ratio.max().item<double>();
}

// First-order relative error (against the logits' largest magnitude) of one
// Llama forward in a type of unit roundoff u, attending to at most kv_length
// slots: every reduction on the way from embedding to logits contributes its
// gamma(n) (the norms, the projections, RoPE's angles, whose absolute error
// grows with the position, the attention scores, the softmax's
// normalisation and its weighted sum, the MLP, the LM head), each op's
// relative perturbation carried through at most unchanged. The random-weight
// test models are scaled so that this holds (their norms keep activations at
// unit scale); the factor 2 covers two forwards compared with each other.
inline double ForwardTolerance(const ModelConfig& c, int64_t kv_length, double u) {
  using float_bounds::Gamma;
  const int64_t attention_width = c.num_attention_heads * c.head_dim;
  const double layer = Gamma(c.hidden_size, u)                            // input RMSNorm
                       + Gamma(c.hidden_size, u)                          // q, k, v projections
                       + Gamma(kv_length, u)                              // RoPE angles: position x frequency
                       + Gamma(c.head_dim, u)                             // scores
                       + 2 * Gamma(kv_length, u)                          // softmax sum, weighted sum of V
                       + Gamma(attention_width, u)                        // output projection
                       + Gamma(c.hidden_size, u)                          // post-attention RMSNorm
                       + Gamma(c.hidden_size, u)                          // gate and up projections
                       + Gamma(c.intermediate_size, u)                    // down projection
                       + 8 * u;                                           // residual adds, SiLU, products
  const double head = Gamma(c.hidden_size, u) + Gamma(c.hidden_size, u);  // final norm, LM head
  return 2 * (c.num_hidden_layers * layer + head);
}

}  // namespace speclab::testing

#endif  // SPECLAB_TESTS_SUPPORT_FLOAT_TOLERANCE_H_
