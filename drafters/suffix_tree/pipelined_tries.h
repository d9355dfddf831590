// PipelinedTries: the suffix tries of a generation and of earlier outputs
// (GenerationTries) for a drafter whose steps may also run pipelined, with
// their device form (DeviceSuffixSpeculation) beside them on CUDA.
//
// A pipelined step hands over a root only the device knows. On CUDA the
// device drafts, and the host's tries learn the text it drafted for when the
// host next needs it: at a step on the host (whose context holds it) or at
// the next prompt (whose Reset reads the last root's sequence back, so that
// the output joins the earlier ones on both sides). Elsewhere the host's
// tries learn each root's sequence and draft: the same drafts.
#ifndef SPECLAB_DRAFTERS_SUFFIX_TREE_PIPELINED_TRIES_H_
#define SPECLAB_DRAFTERS_SUFFIX_TREE_PIPELINED_TRIES_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "drafters/suffix_tree/device_suffix_speculation.h"
#include "drafters/suffix_tree/generation_tries.h"
#include "framework/device/device_drafter.h"

namespace speclab::suffix_decoding {

class PipelinedTries {
 public:
  // As GenerationTries(max_depth, keep_earlier), on `device`; `drafter`
  // names the caller in errors.
  PipelinedTries(int max_depth, bool keep_earlier, c10::Device device, const char* drafter);

  // A new prompt (Drafter::Reset).
  absl::Status Reset(absl::Span<const int32_t> prompt);
  // A step on the host (Drafter::BeginStep).
  absl::Status BeginStep(absl::Span<const int32_t> context);
  // A pipelined step off CUDA: the root's sequence, which the host's tries
  // have now learned.
  absl::StatusOr<std::vector<int32_t>> LearnRoot(const DeviceRoot& root);

  const GenerationTries& host() const { return tries_; }
  // The device form: on CUDA, else null.
  DeviceSuffixSpeculation* device() { return device_ ? &*device_ : nullptr; }

 private:
  const char* drafter_;
  const bool keep_earlier_;
  GenerationTries tries_;
  std::optional<DeviceSuffixSpeculation> device_;
};

}  // namespace speclab::suffix_decoding

#endif  // SPECLAB_DRAFTERS_SUFFIX_TREE_PIPELINED_TRIES_H_
