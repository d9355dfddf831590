#include "framework/drafter.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"

namespace speclab {

std::vector<int32_t> SequenceThrough(absl::Span<const int32_t> context, const TokenTree& tree, int node) {
  std::vector<int32_t> sequence(context.begin(), context.end());
  const std::vector<int32_t> path = tree.PathTokens(node);
  sequence.insert(sequence.end(), path.begin() + 1, path.end());
  return sequence;
}

namespace {

// Fails, naming `who`, unless the riders' tokens, offsets and mask agree in size.
absl::Status CheckSizes(const RiderTokens& riders, const std::string& who) {
  const size_t r = riders.tokens.size();
  if (riders.offsets.size() != r || riders.sees.size() != r * r)
    return absl::InternalError(absl::StrCat(who, " gave ", r, " riders with ", riders.offsets.size(),
                                            " offsets and a ", riders.sees.size(), "-entry mask (expected ", r,
                                            " and ", r * r, ")"));
  return absl::OkStatus();
}

}  // namespace

absl::Status RiderTokens::Check(const std::string& drafter, int64_t vocab) const {
  RETURN_IF_ERROR(CheckSizes(*this, absl::StrCat("drafter '", drafter, "'")));
  const size_t r = tokens.size();
  for (size_t i = 0; i < r; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab)
      return absl::InternalError(absl::StrCat("drafter '", drafter, "' gave rider ", i, " the token ", tokens[i],
                                              ", outside the vocabulary of ", vocab));
    if (offsets[i] < 1)
      return absl::InternalError(absl::StrCat("drafter '", drafter, "' placed rider ", i, " at offset ", offsets[i],
                                              " from the root (expected >= 1)"));
    if (!sees[i * r + i])
      return absl::InternalError(absl::StrCat("drafter '", drafter, "' has rider ", i, " not seeing itself"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RiderTokens> RiderParts::Gather(absl::Span<Drafter* const> parts) {
  std::vector<RiderTokens> each;
  sizes_.clear();
  int total = 0;
  for (Drafter* part : parts) {
    ASSIGN_OR_RETURN(RiderTokens riders, part->Riders());
    sizes_.push_back(riders.size());
    total += riders.size();
    each.push_back(std::move(riders));
  }
  RiderTokens all;
  all.sees.assign(static_cast<size_t>(total) * total, 0);
  int at = 0;
  for (const RiderTokens& riders : each) {
    RETURN_IF_ERROR(CheckSizes(riders, "a part"));
    const int r = riders.size();
    all.tokens.insert(all.tokens.end(), riders.tokens.begin(), riders.tokens.end());
    all.offsets.insert(all.offsets.end(), riders.offsets.begin(), riders.offsets.end());
    for (int i = 0; i < r; ++i)
      for (int j = 0; j < r; ++j) all.sees[static_cast<size_t>(at + i) * total + at + j] = riders.sees[i * r + j];
    at += r;
  }
  return all;
}

absl::Status RiderParts::Scatter(absl::Span<Drafter* const> parts, const at::Tensor& logits) {
  if (parts.size() != sizes_.size())
    return absl::InternalError(absl::StrCat("riders of ", sizes_.size(), " drafters scattered to ", parts.size()));
  int64_t at = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (sizes_[i] == 0) continue;
    RETURN_IF_ERROR(parts[i]->RidersScored(logits.slice(0, at, at + sizes_[i])));
    at += sizes_[i];
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> Drafter::NextTokenLogits(const TokenTree&, absl::Span<const int>,
                                                    const at::Tensor&) {
  return absl::FailedPreconditionError("this drafter gives tokens only, not next-token logits");
}

absl::StatusOr<at::Tensor> Drafter::PartLogits(int part, const TokenTree& tree, absl::Span<const int> nodes,
                                               const at::Tensor& node_tokens) {
  if (part != 0)
    return absl::InvalidArgumentError(absl::StrCat("part ", part, " of a drafter of one part"));
  return NextTokenLogits(tree, nodes, node_tokens);
}

absl::StatusOr<at::Tensor> Drafter::NodeHiddenStates(absl::Span<const int>) {
  return absl::UnimplementedError("this drafter gives no hidden states");
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
