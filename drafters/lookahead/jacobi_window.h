// JacobiWindow: lookahead decoding's lookahead branch (docs/algorithms.md
// §4.9). N - 1 levels of W guessed tokens; level j's column c stands at
// offset 1 + c + j past the root. Each step the target scores the whole
// window beside the tree (as riders: RiderTokens), each token seeing the
// sequence root, V0[0..c], V1[c], .., Vj[c], which ends with itself; the
// target's greedy token after the last level's column c is a new guess one
// position further on. Every column then gives an n-gram
//   (V0[c], V1[c], .., V_{N-2}[c], new[c])
// keyed by its first token, and the window moves on a level: V_j <- V_{j+1},
// V_{N-2} <- the new guesses (one Jacobi iteration, as the root moves on by
// at least one token a step).
#ifndef SPECLAB_DRAFTERS_LOOKAHEAD_JACOBI_WINDOW_H_
#define SPECLAB_DRAFTERS_LOOKAHEAD_JACOBI_WINDOW_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "framework/drafter.h"

namespace speclab::lookahead {

struct Ngram {
  int32_t key;
  std::vector<int32_t> follower;  // N - 1 tokens
};

class JacobiWindow {
 public:
  // `levels` = N - 1 >= 1 rows of `width` = W >= 1 tokens, `initial` (levels x
  // width, level-major) the first guesses.
  JacobiWindow(int levels, int width, std::vector<int32_t> initial);

  int levels() const { return levels_; }
  int width() const { return width_; }
  // Level j's column c.
  int32_t at(int level, int column) const { return tokens_[level * width_ + column]; }

  // The window as riders, level-major (rider j * W + c is level j's column c).
  RiderTokens Riders() const;
  // The riders of the last level, whose logits give the new guesses.
  int64_t last_level_begin() const { return static_cast<int64_t>(levels_ - 1) * width_; }

  // One Jacobi iteration: `guesses` (W tokens, the target's greedy tokens
  // after the last level) become the last level. Returns each column's n-gram
  // (in column order) from the window before the move.
  absl::StatusOr<std::vector<Ngram>> Advance(absl::Span<const int32_t> guesses);

  // Replaces level j's column c (the authors' code swaps EOS guesses out of
  // the last level, which keeps the window off the end of text).
  void Replace(int level, int column, int32_t token) { tokens_[level * width_ + column] = token; }

  // Iterations so far: every level was guessed by the target once this
  // reaches levels() - 1 (the first level stays the initial guess until then).
  int iterations() const { return iterations_; }

 private:
  int levels_, width_;
  std::vector<int32_t> tokens_;  // levels x width, level-major
  int iterations_ = 0;
};

}  // namespace speclab::lookahead

#endif  // SPECLAB_DRAFTERS_LOOKAHEAD_JACOBI_WINDOW_H_
