// DeviceSuffixSpeculation: SuffixDecoding's speculation (suffix_trie.h) from
// a root only the device knows, so that pipelined steps draft without the
// host (DeviceDrafter::ContinuationAt, ContinuationsAt).
//
// No trie lives on the device: the generation is the root's context, and the
// earlier outputs are one text copied there as they join. A step finds every
// match of the sequence's suffixes in both and grows each match length's
// tree from its occurrences' continuations, in three launches
// (cuda/suffix_kernel.h says how). The drafts are the host tries' exactly:
// their probabilities are ratios of counts, their ties the trie's order.
// CUDA only; the drafter's CPU path asks its host tries.
#ifndef SPECLAB_DRAFTERS_SUFFIX_TREE_DEVICE_SUFFIX_SPECULATION_H_
#define SPECLAB_DRAFTERS_SUFFIX_TREE_DEVICE_SUFFIX_SPECULATION_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "drafters/suffix_tree/cuda/suffix_kernel.h"
#include "drafters/suffix_tree/suffix_trie.h"
#include "framework/device/device_drafter.h"

namespace speclab::suffix_decoding {

class DeviceSuffixSpeculation {
 public:
  // Tries counting substrings of up to `max_depth` tokens, on a CUDA
  // `device`; `drafter` names the caller in errors. A call whose limits pass
  // the kernel's (cuda/suffix_kernel.h: max_depth, drafts a step) returns
  // Unimplemented, naming the drafter and what is too large: the engine
  // then steps on the host.
  DeviceSuffixSpeculation(int max_depth, c10::Device device, const char* drafter)
      : max_depth_(max_depth), device_(device), drafter_(drafter) {}

  // An earlier generation's output joins those searched.
  void AddEarlier(absl::Span<const int32_t> output);

  // The sequence is root.context[0..s) then root.last_two (s =
  // root.position.start[0]). Its SuffixTrie::Speculate() with `limits` (tree
  // true) in the trie of the sequence and in the earlier outputs' (where
  // there are any), as `choice` says (kBetter: the better scored, ties to
  // the sequence's; kEach: both): each drafted node's path, in the order
  // drafted, as `max_candidates` candidates of `path_tokens` tokens (kEach:
  // 2 * max_candidates, the sequence's draft's first).
  absl::StatusOr<DeviceContinuations> Candidates(const DeviceRoot& root, const SpeculationLimits& limits,
                                                 TextChoice choice, int max_candidates, int path_tokens);

  // The same speculation's path (`limits` with tree false) as `length`
  // tokens after the root: tokens [length + 1] int64, the root first, then
  // ToFixedLength(path, length, root) (drafters/common/fixed_length.h),
  // the path of the better draft (kBetter) or of the first that is not
  // empty (kEach; found [1] int64: 1 where there is one, else 0).
  struct Chain {
    at::Tensor tokens, found;
  };
  absl::StatusOr<Chain> ChainOf(const DeviceRoot& root, const SpeculationLimits& limits, TextChoice choice,
                                int length);

  // The sequence of the last root a call was given, read back (this waits
  // for the device); empty where no call came since the last Take or Forget.
  std::vector<int32_t> TakeLastSequence();
  void Forget() { last_context_ = at::Tensor(); }

 private:
  struct Call {
    at::Tensor context, last_two, start;
    int64_t stride;  // the longer text's positions: the sequence's bound, or the earlier outputs'
  };
  absl::StatusOr<Call> Prepare(const DeviceRoot& root, const SpeculationLimits& limits);
  absl::Status Launch(const Call& call, const SpeculationLimits& limits, SpeculationOutput out);
  const at::Tensor& Budgets(const SpeculationLimits& limits);

  const int max_depth_;
  const c10::Device device_;
  const char* drafter_;
  std::vector<int64_t> earlier_;  // each output after a -1
  at::Tensor earlier_on_device_;  // earlier_ where current
  at::Tensor workspace_;          // bytes
  std::map<std::tuple<int, double, double>, at::Tensor> budgets_;  // (max_tokens, factor, offset) -> [max_depth + 1]
  at::Tensor seen_;               // [3]: the last call's last_two and start
  at::Tensor last_context_;       // the last call's context; undefined: taken
};

}  // namespace speclab::suffix_decoding

#endif  // SPECLAB_DRAFTERS_SUFFIX_TREE_DEVICE_SUFFIX_SPECULATION_H_
