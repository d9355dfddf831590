// The rules of lookahead's device form (lookahead_device.h), written once for
// its CPU path and its CUDA kernels (cuda/lookahead_kernel.cu): the n-gram
// pool keyed by one token (LruNgramTable's rules, a row per vocabulary
// entry), the window's Jacobi iteration (JacobiWindow::Advance and the
// drafter's EndStep), and the root's drafts (LookaheadDrafter::Continuations).
// Torch-free: plain pointers, host or device.
#ifndef SPECLAB_DRAFTERS_LOOKAHEAD_POOL_RULES_H_
#define SPECLAB_DRAFTERS_LOOKAHEAD_POOL_RULES_H_

#include <cstdint>

#include "framework/device/host_device.h"

namespace speclab::lookahead {

// The most tokens after an n-gram's key (the `level` option's bound, 16, less one).
inline constexpr int kMaxFollower = 15;

// The pool: for each key token, `columns` slots of `follower` tokens with a
// stamp each (0: empty; larger: more recent, from one clock). A key's
// followers most recent first are its slots by decreasing stamp.
struct PoolPointers {
  int64_t* followers;  // [vocab, columns, follower]
  int64_t* stamps;     // [vocab, columns]
  int64_t* clock;      // [1]: the last stamp given
  int64_t vocab;
  int columns, follower;
};

// LruNgramTable::Remember: `follower` after `key` moves to the front of the
// key's list, or joins it there, the least recent dropped where full; its
// stamp is `stamp`, past every stamp of the row.
SPECLAB_HOST_DEVICE inline void RememberNgramAt(PoolPointers pool, int64_t key, const int64_t* follower,
                                                int64_t stamp) {
  if (key < 0 || key >= pool.vocab) return;
  int64_t* stamps = pool.stamps + key * pool.columns;
  int64_t* row = pool.followers + key * pool.columns * pool.follower;
  int same = -1, empty = -1, oldest = -1;
  for (int j = 0; j < pool.columns; ++j) {
    if (stamps[j] == 0) {
      if (empty < 0) empty = j;
      continue;
    }
    bool equal = true;
    for (int t = 0; t < pool.follower && equal; ++t) equal = row[j * pool.follower + t] == follower[t];
    if (equal) same = j;
    if (oldest < 0 || stamps[j] < stamps[oldest]) oldest = j;
  }
  int slot = same;
  if (slot < 0) {
    slot = empty >= 0 ? empty : oldest;
    for (int t = 0; t < pool.follower; ++t) row[slot * pool.follower + t] = follower[t];
  }
  stamps[slot] = stamp;
}

// RememberNgramAt with the clock's next stamp.
SPECLAB_HOST_DEVICE inline void RememberNgram(PoolPointers pool, int64_t key, const int64_t* follower) {
  RememberNgramAt(pool, key, follower, ++*pool.clock);
}

// Position p of the sequence context[0..s) then last_two[0..1].
SPECLAB_HOST_DEVICE inline int64_t TokenAt(const int64_t* context, const int64_t* last_two, int64_t s, int64_t p) {
  return p < s ? context[p] : last_two[p - s];
}

// LruNgramTable::Learn of the text that arrived (pool_from_prompt): every
// window of 1 + follower tokens of the sequence above that ends at a
// position in [*learned, s + 2), in order; then *learned = s + 2.
SPECLAB_HOST_DEVICE inline void LearnText(PoolPointers pool, const int64_t* context, const int64_t* last_two, int64_t s,
                                          int64_t* learned) {
  int64_t follower[kMaxFollower];
  const int64_t first_end = *learned > pool.follower ? *learned : pool.follower;
  for (int64_t end = first_end; end < s + 2; ++end) {
    const int64_t key = end - pool.follower;
    for (int t = 0; t < pool.follower; ++t) follower[t] = TokenAt(context, last_two, s, key + 1 + t);
    RememberNgram(pool, TokenAt(context, last_two, s, key), follower);
  }
  *learned = s + 2;
}

// LookaheadDrafter::Continuations of the root: its followers, most recent
// first, each cut to max_tokens, the first max_candidates distinct ones.
// Candidate c is tokens[c * max_tokens ..] of lengths[c] tokens (0 past the
// last found); the entries past a candidate hold the root.
SPECLAB_HOST_DEVICE inline void BranchFromRoot(PoolPointers pool, int64_t root, int max_tokens, int max_candidates,
                                               int64_t* tokens, int64_t* lengths) {
  for (int c = 0; c < max_candidates; ++c) {
    lengths[c] = 0;
    for (int i = 0; i < max_tokens; ++i) tokens[c * max_tokens + i] = root;
  }
  if (root < 0 || root >= pool.vocab) return;
  const int64_t* stamps = pool.stamps + root * pool.columns;
  const int64_t* row = pool.followers + root * pool.columns * pool.follower;
  const int keep = max_tokens < pool.follower ? max_tokens : pool.follower;
  int found = 0;
  int64_t below = INT64_MAX;  // slots in decreasing stamp order: the largest below the last
  for (int pass = 0; pass < pool.columns && found < max_candidates; ++pass) {
    int next = -1;
    for (int j = 0; j < pool.columns; ++j)
      if (stamps[j] > 0 && stamps[j] < below && (next < 0 || stamps[j] > stamps[next])) next = j;
    if (next < 0) break;
    below = stamps[next];
    const int64_t* candidate = row + next * pool.follower;
    bool seen = false;
    for (int k = 0; k < found && !seen; ++k) {
      bool equal = true;
      for (int i = 0; i < keep && equal; ++i) equal = tokens[k * max_tokens + i] == candidate[i];
      seen = equal;
    }
    if (seen) continue;
    for (int i = 0; i < keep; ++i) tokens[found * max_tokens + i] = candidate[i];
    lengths[found++] = keep;
  }
}

// ToFixedLength (drafters/common/fixed_length.h) of candidate 0 of
// BranchFromRoot's output, as a device chain: chain[0] = the root, then
// `length` tokens: the candidate's (lengths[0] of them, cut to length), its
// last (the root's where it has none) repeated after.
SPECLAB_HOST_DEVICE inline void ChainOfFirst(const int64_t* tokens, const int64_t* lengths, int64_t root, int length,
                                             int64_t* chain) {
  chain[0] = root;
  for (int i = 0; i < length; ++i) {
    const int64_t take = i < lengths[0] ? i : lengths[0] - 1;  // -1: the root
    chain[1 + i] = take < 0 ? root : tokens[take];
  }
}

// One Jacobi iteration: window [levels, width] level-major, guesses [width]
// (the target's greedy tokens after the last level's columns), standins
// [width]. Where `remember`, each column's n-gram (V0[c]; V1[c], ..,
// guesses[c]) joins the pool, in column order; then the levels move up
// (V_j <- V_{j+1}) and the guesses become the last, an `eos` guess replaced
// by its column's stand-in. Column c's n-gram gets the clock's c + 1-th next
// stamp, so the CUDA kernel, which pools columns of distinct keys at once
// (those of one key in column order), gives the stamps this loop gives.
SPECLAB_HOST_DEVICE inline void AdvanceWindow(PoolPointers pool, int64_t* window, int levels, int width,
                                              const int64_t* guesses, const int64_t* standins, int64_t eos,
                                              bool remember) {
  int64_t follower[kMaxFollower];
  if (remember) {
    for (int c = 0; c < width; ++c) {
      for (int j = 1; j < levels; ++j) follower[j - 1] = window[j * width + c];
      follower[levels - 1] = guesses[c];
      RememberNgram(pool, window[c], follower);
    }
  }
  for (int j = 0; j + 1 < levels; ++j)
    for (int c = 0; c < width; ++c) window[j * width + c] = window[(j + 1) * width + c];
  for (int c = 0; c < width; ++c) window[(levels - 1) * width + c] = guesses[c] == eos ? standins[c] : guesses[c];
}

}  // namespace speclab::lookahead

#endif  // SPECLAB_DRAFTERS_LOOKAHEAD_POOL_RULES_H_
