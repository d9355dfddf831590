// PromptLookupDrafter: n-gram match in the prompt and the generated text
// (Saxena 2023; docs/algorithms.md §4.2). Gives tokens without distributions.
#ifndef SPECLAB_DRAFTERS_PROMPT_LOOKUP_PROMPT_LOOKUP_DRAFTER_H_
#define SPECLAB_DRAFTERS_PROMPT_LOOKUP_PROMPT_LOOKUP_DRAFTER_H_

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "framework/device/device_drafter.h"
#include "framework/drafter.h"

namespace speclab {

// For n = max_ngram..1, the first earlier occurrence of the last n tokens of
// `sequence` (scanning from the start) whose continuation starts before the
// trailing n-gram itself: the position after that occurrence (nullopt if
// no n-gram occurred earlier).
std::optional<int64_t> LookupFrom(absl::Span<const int32_t> sequence, int max_ngram);

// Up to `max_tokens` tokens that followed that occurrence.
std::vector<int32_t> LookupContinuation(absl::Span<const int32_t> sequence, int max_ngram, int max_tokens);

// Up to `max_candidates` distinct continuations of up to `max_tokens` tokens:
// those after every earlier occurrence of the last n tokens, for n =
// max_ngram..1, occurrences in scanning order. The first is
// LookupContinuation()'s.
std::vector<std::vector<int32_t>> LookupCandidates(absl::Span<const int32_t> sequence, int max_ngram, int max_tokens,
                                                   int max_candidates);

// Exactly `length` tokens: those from LookupFrom() on in the sequence
// extended by the drafts themselves (where the match runs into the end, the
// matched stretch repeats: what lookup would draft again once these are
// accepted), or the last token repeated where nothing matched.
std::vector<int32_t> FixedLengthContinuation(absl::Span<const int32_t> sequence, int max_ngram, int length);

// The Drafter interface, and its device form (framework/device/device_drafter.h).
class PromptLookupDrafter final : public Drafter, public DeviceDrafter {
 public:
  // `device` and `capacity` size the copy of the context that
  // ContinuationAt() keeps on the device (grown when a step needs more).
  PromptLookupDrafter(int max_ngram, int num_pred_tokens, c10::Device device = c10::Device(c10::kCPU),
                      int64_t capacity = 0)
      : max_ngram_(max_ngram), num_pred_tokens_(num_pred_tokens), device_(device), capacity_(capacity) {}

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override;
  // LookupCandidates(): every match, for trees (the `trie` builder).
  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override;
  // FixedLengthContinuation() of the context on the device: one launch on
  // CUDA (cuda/ngram_kernel.h), a host loop elsewhere. Unimplemented where
  // `length` exceeds num_pred_tokens (the engine then steps on the host).
  absl::StatusOr<at::Tensor> ContinuationAt(const DeviceRoot& root, int length) override;
  // ContinuationAt's rule as a guess: FixedLengthContinuation() of the
  // sequence through any position (one launch on CUDA). Unimplemented past
  // num_pred_tokens, and on CUDA with kernels off.
  absl::StatusOr<ChainGuess> GuessOf(int count) override;
  // LookupCandidates() of root.context and the root: one launch on CUDA, a
  // host loop elsewhere.
  absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                      int max_candidates) override;
  absl::Status EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) override {
    return absl::OkStatus();
  }

 private:
  int max_ngram_;
  int num_pred_tokens_;
  c10::Device device_;
  int64_t capacity_;

  std::vector<int32_t> context_;
  at::Tensor device_context_;  // int64 [>= capacity_]: the context ContinuationAt() has seen, then its drafts
};

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_PROMPT_LOOKUP_PROMPT_LOOKUP_DRAFTER_H_
