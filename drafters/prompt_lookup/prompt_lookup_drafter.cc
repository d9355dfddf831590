#include "drafters/prompt_lookup/prompt_lookup_drafter.h"

#include <algorithm>

#include "framework/core/status_macros.h"

namespace speclab {

std::vector<int32_t> LookupContinuation(absl::Span<const int32_t> sequence, int max_ngram, int max_tokens) {
  const int64_t length = static_cast<int64_t>(sequence.size());
  for (int n = std::min<int64_t>(max_ngram, length - 1); n >= 1; --n) {
    absl::Span<const int32_t> key = sequence.subspan(length - n);
    for (int64_t start = 0; start < length - n; ++start) {  // never the trailing key itself
      if (!std::equal(key.begin(), key.end(), sequence.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t to = std::min<int64_t>(length, from + max_tokens);
      return std::vector<int32_t>(sequence.begin() + from, sequence.begin() + to);
    }
  }
  return {};
}

absl::Status PromptLookupDrafter::BeginStep(absl::Span<const int32_t> context) {
  context_.assign(context.begin(), context.end());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> PromptLookupDrafter::Continuation(const TokenTree& tree, int node,
                                                                       int max_tokens) {
  std::vector<int32_t> sequence = context_;  // ends with the root
  const std::vector<int32_t> path = tree.PathTokens(node);
  sequence.insert(sequence.end(), path.begin() + 1, path.end());
  return LookupContinuation(sequence, max_ngram_, std::min(max_tokens, num_pred_tokens_));
}

namespace {

const bool kRegistered = DrafterRegistry::Add({
    .name = "prompt_lookup",
    .description = "n-gram match in the prompt and generated text (PLD); gives tokens only",
    .lossless = "-",
    .create = [](Options& options, const DrafterEnvironment&) -> absl::StatusOr<std::unique_ptr<Drafter>> {
      ASSIGN_OR_RETURN(int64_t max_ngram, options.GetInt("max_ngram_size", 3));
      ASSIGN_OR_RETURN(int64_t num_pred, options.GetInt("num_pred_tokens", 10));
      if (max_ngram < 1) return options.Error("max_ngram_size", "expected an integer >= 1");
      if (num_pred < 1) return options.Error("num_pred_tokens", "expected an integer >= 1");
      return std::unique_ptr<Drafter>(
          std::make_unique<PromptLookupDrafter>(static_cast<int>(max_ngram), static_cast<int>(num_pred)));
    },
});

}  // namespace
}  // namespace speclab
