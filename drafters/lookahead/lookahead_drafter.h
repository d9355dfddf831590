// `lookahead`: lookahead decoding (docs/algorithms.md §4.9): the target
// drafts for itself. A Jacobi window of guesses (jacobi_window.h) rides in
// each step's verification forward (Drafter::Riders), so one target forward
// both moves the window on an iteration and verifies the step's tree; the
// window's trajectories fill an n-gram pool, and the pool's n-grams that
// follow the root are the next step's drafts.
//
//   drafter: {type: lookahead, window: 7, level: 5, guess_set: 7}
//   tree_builder: {type: trie, budget: 28, max_candidates: 7}
//   verifier: {type: point_mass}          # or greedy at T = 0
//
// Options: window (W, 7), level (N, 5: n-grams of N tokens, N - 1 levels of
// W guesses ride along), guess_set (G, 7: the n-grams kept per key, least
// recently seen dropped first), pool_from_prompt (false: also learn the
// prompt's and the output's own n-grams). The defaults are Spec-Bench's.
// Gives tokens only: verify with greedy or point_mass (the paper's sampling
// rule is point_mass's). The window's first guesses are tokens of the prompt
// drawn with the experiment's seed, and so are the stand-ins for the target's
// end-of-text token where it is guessed (the authors' code does both: here
// kStandInRows rows of W drawn at Reset, row i serving iteration i); what is
// drafted never changes the law.
// Device form (lookahead_device.h): the window, the pool and the stand-ins
// live on the device from a generation's first pipelined step, the window
// rides the engine's forward (DeviceDrafter::RidersAt) and moves on there,
// and the drafts come from the pool there, so steps run pipelined, chains
// (the most recent n-gram, filled to the chain's length: ToFixedLength) and
// tries alike.
#ifndef SPECLAB_DRAFTERS_LOOKAHEAD_LOOKAHEAD_DRAFTER_H_
#define SPECLAB_DRAFTERS_LOOKAHEAD_LOOKAHEAD_DRAFTER_H_

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "drafters/common/lru_ngram_table.h"
#include "drafters/lookahead/lookahead_device.h"
#include "drafters/lookahead/jacobi_window.h"
#include "framework/device/device_drafter.h"
#include "framework/device_transfer.h"
#include "framework/drafter.h"

namespace speclab::lookahead {

struct LookaheadOptions {
  int window = 7;     // W
  int level = 5;      // N
  int guess_set = 7;  // G
  bool pool_from_prompt = false;
};

class LookaheadDrafter final : public Drafter, public DeviceDrafter {
 public:
  // Rows of end-of-text stand-ins drawn at Reset.
  static constexpr int kStandInRows = 32;

  // `eos`: the target's end-of-text token (-1: none), never left in the
  // window's last level. `vocab`: the target's vocabulary size, which the
  // device form's pool needs (-1: unknown, no device form).
  LookaheadDrafter(LookaheadOptions options, uint64_t seed, int64_t eos = -1, int64_t vocab = -1);

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }
  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures& target) override;
  absl::Status BeginStep(absl::Span<const int32_t> context) override;
  // The pool's n-grams keyed by path(node)'s last token, most recent first.
  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override;
  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override;
  absl::StatusOr<RiderTokens> Riders() override;
  absl::Status RidersScored(const at::Tensor& logits) override;
  absl::Status EndStep(const TokenTree& tree, absl::Span<const int> accepted_path,
                       const TargetFeatures& target) override;

  // The device form: from a generation's first call, its state lives on the
  // root's device; the host's (window(), pool()) stays as Reset left it.
  absl::StatusOr<at::Tensor> ContinuationAt(const DeviceRoot& root, int length) override;
  absl::StatusOr<DeviceContinuations> ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                      int max_candidates) override;
  absl::StatusOr<DeviceRiders> RidersAt() override;
  absl::Status RidersScoredAt(const at::Tensor& logits) override;

  const JacobiWindow& window() const { return *window_; }
  const LruNgramTable& pool() const { return pool_; }
  // The device form's state, once a device step ran in this generation (else null).
  const DeviceLookahead* device_state() const { return device_ ? &*device_ : nullptr; }

 private:
  // A token of the prompt drawn with random_ (the window's first guesses, and EOS's stand-ins).
  int32_t PromptToken();
  // The device form's state on `device`, taken from the host's at the generation's first call.
  absl::StatusOr<DeviceLookahead*> DeviceState(c10::Device device);

  LookaheadOptions o_;
  int64_t eos_;
  std::mt19937_64 random_;
  std::vector<int32_t> prompt_;
  LruNgramTable pool_;
  std::optional<JacobiWindow> window_;
  std::vector<int32_t> context_;
  std::optional<AsyncRead> guesses_;  // the target's greedy tokens after the last level, on their way
  std::vector<int32_t> standins_;     // [kStandInRows, W]: row i stands in for EOS at iteration i mod kStandInRows
  int64_t vocab_;
  std::optional<DeviceLookahead> device_;
};

}  // namespace speclab::lookahead

#endif  // SPECLAB_DRAFTERS_LOOKAHEAD_LOOKAHEAD_DRAFTER_H_
