// Building blocks of chain verification rules on the device.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CHAIN_ON_DEVICE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CHAIN_ON_DEVICE_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/status.h"
#include "framework/device/device_verifier.h"

namespace speclab::verifiers {

// Checks shapes: tokens [n] int64 with n >= 1, target rows [n, vocab], and
// (when `needs_draft`) draft rows of the same shape.
absl::Status CheckDeviceChain(const DeviceChainProblem& problem, const std::string& rule, bool needs_draft);

// The number of leading true entries of `accepted` [m] bool, as a 0-d int64.
at::Tensor LeadingAccepted(const at::Tensor& accepted);

// {accepted, extra[accepted]} as int64 [2]: the rule's answer.
at::Tensor ChainAnswer(const at::Tensor& accepted, const at::Tensor& extra_per_stop);

// Greedy matching: drafts are accepted while they equal the target's argmax
// before them, and the argmax where matching stops is the extra token. With
// one-hot target rows (temperature 0) this is the answer of every lossless
// chain rule, at a few launches instead of a few dozen.
at::Tensor GreedyChainAnswer(const DeviceChainProblem& problem);

// The chain rules' counts (RejectionAccepted, BlockAccepted) take tokens
// [rows] int64 (the root, then the drafts), p and q [rows >= min_rows, cols]
// and one uniform a draft, u [rows - 1]; throws (c10::Error) naming `op`
// otherwise.
void CheckChainCountInputs(const char* op, const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q,
                           const at::Tensor& u, int64_t min_rows);

// Whether their kernels take those inputs: all on p's device, p, q and u
// float32 (framework/device/kernel_launch.h).
bool ChainCountKernelsTake(const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q, const at::Tensor& u);

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CHAIN_ON_DEVICE_H_
