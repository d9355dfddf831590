#include "framework/drafter.h"

namespace speclab {

std::vector<int32_t> SequenceThrough(absl::Span<const int32_t> context, const TokenTree& tree, int node) {
  std::vector<int32_t> sequence(context.begin(), context.end());
  const std::vector<int32_t> path = tree.PathTokens(node);
  sequence.insert(sequence.end(), path.begin() + 1, path.end());
  return sequence;
}

absl::StatusOr<at::Tensor> Drafter::NextTokenLogits(const TokenTree&, absl::Span<const int>,
                                                    const at::Tensor&) {
  return absl::FailedPreconditionError("this drafter gives tokens only, not next-token logits");
}

absl::StatusOr<std::vector<int32_t>> Drafter::Continuation(const TokenTree&, int, int) {
  return absl::FailedPreconditionError("this drafter gives next-token logits, not token continuations");
}

absl::StatusOr<std::vector<std::vector<int32_t>>> Drafter::Continuations(const TokenTree& tree, int node,
                                                                         int max_tokens, int max_candidates) {
  std::vector<std::vector<int32_t>> out;
  if (max_candidates < 1) return out;
  auto continuation = Continuation(tree, node, max_tokens);
  if (!continuation.ok()) return continuation.status();
  if (!continuation->empty()) out.push_back(*std::move(continuation));
  return out;
}

}  // namespace speclab
