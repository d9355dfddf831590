#include "drafters/lookahead/jacobi_window.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace speclab::lookahead {

JacobiWindow::JacobiWindow(int levels, int width, std::vector<int32_t> initial)
    : levels_(levels), width_(width), tokens_(std::move(initial)) {
  tokens_.resize(static_cast<size_t>(levels_) * width_, 0);
}

RiderTokens JacobiWindow::Riders() const {
  const int r = levels_ * width_;
  RiderTokens riders;
  riders.tokens = tokens_;
  riders.offsets.resize(r);
  riders.sees.assign(static_cast<size_t>(r) * r, 0);
  for (int j = 0; j < levels_; ++j) {
    for (int c = 0; c < width_; ++c) {
      const int i = j * width_ + c;
      riders.offsets[i] = 1 + c + j;
      // The sequence V0[0..c], V1[c], .., Vj[c]: consecutive positions 1 .. 1 + c + j.
      for (int before = 0; before <= c; ++before) riders.sees[static_cast<size_t>(i) * r + before] = 1;
      for (int level = 1; level <= j; ++level) riders.sees[static_cast<size_t>(i) * r + level * width_ + c] = 1;
    }
  }
  return riders;
}

absl::StatusOr<std::vector<Ngram>> JacobiWindow::Advance(absl::Span<const int32_t> guesses) {
  if (static_cast<int>(guesses.size()) != width_)
    return absl::InternalError(absl::StrCat("lookahead: ", guesses.size(), " new guesses for a window ", width_,
                                            " wide"));
  std::vector<Ngram> ngrams(width_);
  for (int c = 0; c < width_; ++c) {
    ngrams[c].key = at(0, c);
    for (int j = 1; j < levels_; ++j) ngrams[c].follower.push_back(at(j, c));
    ngrams[c].follower.push_back(guesses[c]);
  }
  std::move(tokens_.begin() + width_, tokens_.end(), tokens_.begin());
  std::copy(guesses.begin(), guesses.end(), tokens_.end() - width_);
  ++iterations_;
  return ngrams;
}

}  // namespace speclab::lookahead
