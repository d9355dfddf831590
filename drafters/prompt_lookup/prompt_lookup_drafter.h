// PromptLookupDrafter: n-gram match in the prompt and the generated text
// (Saxena 2023; shared/ALGORITHMS.md §4.2). Gives tokens without distributions.
#ifndef SPECLAB_DRAFTERS_PROMPT_LOOKUP_PROMPT_LOOKUP_DRAFTER_H_
#define SPECLAB_DRAFTERS_PROMPT_LOOKUP_PROMPT_LOOKUP_DRAFTER_H_

#include <vector>

#include "framework/drafter.h"

namespace speclab {

// For n = max_ngram..1, the first earlier occurrence of the last n tokens of
// `sequence` (scanning from the start) whose continuation starts before the
// trailing n-gram itself; returns up to `max_tokens` tokens that followed it.
std::vector<int32_t> LookupContinuation(absl::Span<const int32_t> sequence, int max_ngram, int max_tokens);

class PromptLookupDrafter final : public Drafter {
 public:
  PromptLookupDrafter(int max_ngram, int num_pred_tokens)
      : max_ngram_(max_ngram), num_pred_tokens_(num_pred_tokens) {}

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }
  absl::Status Reset(absl::Span<const int32_t>) override { return absl::OkStatus(); }
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override;
  absl::Status EndStep(const TokenTree&, absl::Span<const int>) override { return absl::OkStatus(); }

 private:
  int max_ngram_;
  int num_pred_tokens_;
  std::vector<int32_t> context_;
};

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_PROMPT_LOOKUP_PROMPT_LOOKUP_DRAFTER_H_
