// SamplingPick: a chain step's draw on the device, as drafters' device chains
// take it (ChainPick): q = the drafter's logits under the experiment's
// processor chain, the token its exponential race (one draw from q), q kept
// as the step's row; at temperature 0 the argmax, whose q is its one-hot, no
// row kept (DraftTree::draft_probs undefined). Row-wise (ChainPick::RowWise):
// each row's draw reads that row and its noise alone.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SAMPLING_PICK_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SAMPLING_PICK_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>
#include <utility>

#include "framework/device/device_model.h"
#include "framework/sampling.h"

namespace speclab::tree_builders {

ChainPick SamplingPick(const SamplingParams& sampling, at::Generator* generator);

// A pick's parameters (its key's part): the warp's temperature, top_k, top_p.
using WarpParams = std::tuple<double, int64_t, double>;
WarpParams WarpOf(const SamplingParams& sampling);
// One draw inside a pick, a row at a time: the tokens (int64 [k]) of logits'
// exponential race ([k, vocab]) with `noise` under the warp, and the warped q
// they were drawn from ([k, vocab] float32).
std::pair<at::Tensor, at::Tensor> WarpedDraw(const WarpParams& warp, const at::Tensor& logits,
                                             const at::Tensor& noise);

}  // namespace speclab::tree_builders

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_COMMON_SAMPLING_PICK_H_
