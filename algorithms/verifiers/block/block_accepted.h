#ifndef SPECLAB_ALGORITHMS_VERIFIERS_BLOCK_BLOCK_ACCEPTED_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_BLOCK_BLOCK_ACCEPTED_H_

// Block verification's stopping point on the device (block_device.cc), its
// kernels in cuda/.
#include <ATen/core/Tensor.h>

#include <utility>

namespace speclab::verifiers {

// Block verification's stopping point (docs/algorithms.md §1.9) for the
// drafts x_i = tokens[i], i = 1..gamma (gamma = rows - 1 >= 1), with one
// uniform per position (u[i - 1] for position i): the weights w_i =
// min(1, w_{i-1} p[i-1][x_i] / q[i][x_i]), w_0 = 1 (0 where q[i][x_i] = 0),
// as exp(L_i - max_{j<=i} L_j) over the running sum L of log ratios; h_i =
// m_i / (m_i + 1 - w_i) with m_i the mass of r_i = (w_i p[i] - q[i + 1])+ for
// 0 < i < gamma (1 where that denominator is not positive), h_gamma =
// w_gamma; and the largest i with u[i - 1] < h_i (0 if none). tokens [rows]
// int64, p, q [rows, cols] float32, u [gamma] float32. Returns (that i as a
// 0-d int64, the weights w_0..w_gamma [rows] float32): the stopping token is
// then verifiers::ResidualRace(p, q, noise, i, weights) (common/residual_race.h). Two launches on CUDA instead of
// about twenty; ATen: gathers, a cumulative sum and max, the masses.
std::pair<at::Tensor, at::Tensor> BlockAccepted(const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q,
                                                const at::Tensor& u);

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_BLOCK_BLOCK_ACCEPTED_H_
