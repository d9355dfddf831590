#include "drafters/suffix_tree/generation_tries.h"

#include "absl/strings/str_cat.h"

namespace speclab::suffix_decoding {

GenerationTries::GenerationTries(int max_depth, bool keep_earlier)
    : max_depth_(max_depth), keep_earlier_(keep_earlier), generation_(max_depth), earlier_(max_depth) {}

void GenerationTries::Reset(absl::Span<const int32_t> prompt) {
  if (keep_earlier_ && !output_.empty()) {
    earlier_.Extend(output_);
    earlier_.EndSequence();
  }
  output_.clear();
  generation_ = SuffixTrie(max_depth_);
  generation_.Extend(prompt);
  earlier_cursor_.Reset();
  earlier_cursor_.Advance(earlier_, prompt);
  context_.assign(prompt.begin(), prompt.end());
  seen_ = prompt.size();
}

absl::Status GenerationTries::BeginStep(absl::Span<const int32_t> context, const char* drafter) {
  if (context.size() < seen_)
    return absl::FailedPreconditionError(absl::StrCat(drafter, ": the context shrank between steps"));
  const absl::Span<const int32_t> fresh = context.subspan(seen_);
  generation_.Extend(fresh);
  earlier_cursor_.Advance(earlier_, fresh);
  output_.insert(output_.end(), fresh.begin(), fresh.end());
  context_.assign(context.begin(), context.end());
  seen_ = context.size();
  return absl::OkStatus();
}

}  // namespace speclab::suffix_decoding
