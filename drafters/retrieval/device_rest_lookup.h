// DeviceRestLookup: the retrieval drafter's chain (REST's most frequent
// path, rest_lookup.h) and its trie's candidates (the most frequent
// prefixes) from a root only the device knows, so that pipelined steps draft
// without the host (DeviceDrafter::ContinuationAt, ContinuationsAt).
//
// The datastore's tokens and suffix array are copied to the device once. A
// step finds the longest suffix of the sequence in the suffix array, then
// walks down: the matches that continue the path so far are one run of the
// suffix array, sorted by their next token, so a next token's count is the
// length of its run and the host's tie-break (the token seen first) is the
// run first in the array. A trie's candidates count every prefix from where
// neighbouring matches part (cuda/rest_kernel.cu says how). One launch a
// step on CUDA (cuda/rest_kernel.h); on the CPU the walk (RunWalkPath) and
// the host's count.
#ifndef SPECLAB_DRAFTERS_RETRIEVAL_DEVICE_REST_LOOKUP_H_
#define SPECLAB_DRAFTERS_RETRIEVAL_DEVICE_REST_LOOKUP_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "drafters/common/fixed_length.h"
#include "drafters/retrieval/datastore.h"
#include "drafters/retrieval/rest_lookup.h"
#include "framework/device/device_drafter.h"

namespace speclab::retrieval {

struct StorePointers;  // cuda/rest_kernel.h
struct LookupShape;

// The walk over the suffix array's runs, on the host: the path of at most
// min(length, continuation_tokens) tokens that MostFrequentPath() gives of
// CountContinuations(store, sequence, options, length).
std::vector<int32_t> RunWalkPath(const Datastore& store, absl::Span<const int32_t> sequence,
                                 const RestOptions& options, int length);

class DeviceRestLookup {
 public:
  // OK where one launch takes `options` (max_suffix <= 1024, max_matches <=
  // 8192: what the kernel holds in shared memory); else Unimplemented,
  // naming the option.
  static absl::Status Takes(const RestOptions& options);

  // The store's tokens and suffix array copied to `device` where it is not
  // the CPU. `options` must pass Takes().
  DeviceRestLookup(std::shared_ptr<const Datastore> store, RestOptions options, c10::Device device);

  // The sequence is context[0..s) then last_two (s = start[0], the root at
  // s + 1). Returns [length + 1] int64 on the device: the root, then
  // ToFixedLength(MostFrequentPath(CountContinuations(store, sequence,
  // options, length)), length, root).
  absl::StatusOr<at::Tensor> Draft(const at::Tensor& context, const at::Tensor& last_two, const at::Tensor& start,
                                   int length) const;

  // The same sequence's MostFrequentPrefixes(CountContinuations(store,
  // sequence, options, max_tokens), max_candidates): a trie's candidates,
  // the entries past each the root's. On CUDA at most kMaxCandidates
  // (cuda/rest_kernel.h); more are Unimplemented.
  absl::StatusOr<DeviceContinuations> Candidates(const at::Tensor& context, const at::Tensor& last_two,
                                                 const at::Tensor& start, int max_tokens, int max_candidates) const;

 private:
  StorePointers Store() const;  // for the kernels (CUDA builds)
  LookupShape Shape() const;

  std::shared_ptr<const Datastore> store_;
  RestOptions options_;
  c10::Device device_;
  at::Tensor tokens_, suffixes_;  // int32 and int64 copies on a CUDA device
};

}  // namespace speclab::retrieval

#endif  // SPECLAB_DRAFTERS_RETRIEVAL_DEVICE_REST_LOOKUP_H_
