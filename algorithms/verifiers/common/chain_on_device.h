// Building blocks of chain verification rules on the device.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CHAIN_ON_DEVICE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CHAIN_ON_DEVICE_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/status.h"
#include "framework/device_verifier.h"

namespace speclab::verifiers {

// Checks shapes: tokens [n] int64 with n >= 1, target rows [n, vocab], and
// (when `needs_draft`) draft rows of the same shape.
absl::Status CheckDeviceChain(const DeviceChainProblem& problem, const std::string& rule, bool needs_draft);

// The number of leading true entries of `accepted` [m] bool, as a 0-d int64.
at::Tensor LeadingAccepted(const at::Tensor& accepted);

// One token from each row of `weights` [m, vocab] (non-negative, not
// necessarily normalised), [m] int64.
at::Tensor SampleEachRow(const at::Tensor& weights, at::Generator& generator);

// {accepted, extra[accepted]} as int64 [2]: the rule's answer.
at::Tensor ChainAnswer(const at::Tensor& accepted, const at::Tensor& extra_per_stop);

}  // namespace speclab::verifiers

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CHAIN_ON_DEVICE_H_
