// DeviceLookahead: lookahead decoding's state on a device (its Jacobi window,
// n-gram pool and stand-ins), so that a pipelined step rides the window in
// the target's forward, moves it on and drafts from the pool without the host
// (LookaheadDrafter's DeviceDrafter side).
//
// The pool has a row per vocabulary entry (pool_rules.h): the host's table
// keyed by one token never drops a key, so the two hold the same lists in the
// same order. On CUDA each step is two launches (the drafts; after the
// forward, the iteration: cuda/lookahead_kernel.h); on the CPU the same rules
// (pool_rules.h) run in place.
#ifndef SPECLAB_DRAFTERS_LOOKAHEAD_LOOKAHEAD_DEVICE_H_
#define SPECLAB_DRAFTERS_LOOKAHEAD_LOOKAHEAD_DEVICE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "drafters/common/lru_ngram_table.h"
#include "drafters/lookahead/jacobi_window.h"
#include "drafters/lookahead/pool_rules.h"
#include "framework/device/device_drafter.h"

namespace speclab::lookahead {

class DeviceLookahead {
 public:
  // The host's state at a generation's first device step: the window, the
  // pool, the position up to which the text was learned (where `learn`,
  // each step learns on from there: pool_from_prompt) and the stand-ins for
  // the end-of-text token ([rows, width], row i for iteration i mod rows).
  // On the CPU, or on CUDA in a build with CUDA; elsewhere each call returns
  // Unimplemented.
  DeviceLookahead(const JacobiWindow& window, const LruNgramTable& pool, int64_t learned, bool learn,
                  const std::vector<int32_t>& standins, int64_t vocab, int64_t eos, c10::Device device);

  // The window as riders (JacobiWindow::Riders' layout, its tokens on the device).
  const DeviceRiders& riders() const { return riders_; }

  // Learns the text up to the root (where `learn`) and returns the root's
  // continuations (LookaheadDrafter::Continuations), DeviceContinuations'
  // shape, the entries past each candidate the root's.
  absl::StatusOr<DeviceContinuations> LearnAndBranch(const DeviceRoot& root, int max_tokens, int max_candidates);
  // Learns likewise and returns the most recent n-gram as a chain of
  // `length` tokens after the root ([length + 1] int64, the root first),
  // filled as ToFixedLength fills (drafters/common/fixed_length.h).
  absl::StatusOr<at::Tensor> LearnAndChain(const DeviceRoot& root, int length);

  // One Jacobi iteration from the riders' logits ([levels * width, vocab]):
  // the last level's greedy tokens are the new guesses (LookaheadDrafter::
  // EndStep's share of the step).
  absl::Status Advance(const at::Tensor& logits);

  // For tests (one read each): the window, level-major, and a key's followers most recent first.
  std::vector<int32_t> Window() const;
  std::vector<std::vector<int32_t>> Followers(int32_t key) const;

 private:
  PoolPointers Pointers();
  // LearnAndBranch into `out`, and where `chain` is not null LearnAndChain into it.
  absl::Status Draft(const DeviceRoot& root, int max_tokens, int max_candidates, DeviceContinuations* out,
                     at::Tensor* chain);

  int levels_, width_;
  int64_t vocab_, eos_;
  bool learn_;
  int64_t iterations_ = 0;  // Jacobi iterations so far (the host knows each)
  // int64 on the device: followers [vocab, columns, follower], stamps
  // [vocab, columns], clock [1], learned [1], window [levels * width],
  // standins [rows, width].
  at::Tensor followers_, stamps_, clock_, learned_, window_, standins_;
  DeviceRiders riders_;  // tokens: window_
};

}  // namespace speclab::lookahead

#endif  // SPECLAB_DRAFTERS_LOOKAHEAD_LOOKAHEAD_DEVICE_H_
