// Speculative and autoregressive decoding with one target model.
//
// A speculative step: the drafter and tree builder shape a draft tree, the
// target scores every node in one forward (ancestor mask, depth positions),
// one device-to-host transfer brings back what the verifier reads, the
// verifier picks the accepted path and the extra token, and the target's KV
// cache keeps only that path (compaction, no recomputation). Chains of a
// fixed length with a device verifier run pipelined where the drafter allows
// (framework/device/pipelined_chain.h): each step is queued before the previous one
// is read back.
#ifndef SPECLAB_FRAMEWORK_SPECULATIVE_DECODER_H_
#define SPECLAB_FRAMEWORK_SPECULATIVE_DECODER_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/generation.h"
#include "framework/method.h"
#include "framework/model/language_model.h"

namespace speclab {

// Plain token-by-token decoding: the baseline every method is compared with.
absl::StatusOr<Generation> GenerateAutoregressive(LanguageModel& target, absl::Span<const int32_t> prompt,
                                                  const DecodeOptions& options);

absl::StatusOr<Generation> GenerateSpeculative(LanguageModel& target, Method& method,
                                               absl::Span<const int32_t> prompt, const DecodeOptions& options);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_SPECULATIVE_DECODER_H_
