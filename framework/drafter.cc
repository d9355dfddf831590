#include "framework/drafter.h"

namespace speclab {

absl::StatusOr<at::Tensor> Drafter::NextTokenLogits(const TokenTree&, absl::Span<const int>,
                                                    const at::Tensor&) {
  return absl::FailedPreconditionError("this drafter gives tokens only, not next-token logits");
}

absl::StatusOr<std::vector<int32_t>> Drafter::Continuation(const TokenTree&, int, int) {
  return absl::FailedPreconditionError("this drafter gives next-token logits, not token continuations");
}

}  // namespace speclab
