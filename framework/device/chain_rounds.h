// A chain drafted in rounds (DeviceModel::ForwardChainInRoundsAt): the
// procedure every model's form shares, each feeding a round its own way (the
// default's forwards, LlamaModel's graph).
//
// Round r guesses how the chain goes on after its last token (ChainGuess),
// feeds that token and the guesses in one causal forward, and picks from
// each of their rows in turn: pick j + 1 counts only where pick j matched
// guess j, so a round keeps 1 + (the guesses its picks matched) picks. Pick
// i of the chain reads noise row i whatever round it falls in, so the chain
// is the plain chain's (ForwardChainAt) for the same noise, where the
// forwards round alike; the guesses decide only how many rounds it takes.
#ifndef SPECLAB_FRAMEWORK_DEVICE_CHAIN_ROUNDS_H_
#define SPECLAB_FRAMEWORK_DEVICE_CHAIN_ROUNDS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/device/chain_guess.h"
#include "framework/device/device_model.h"

namespace speclab {

// The most guesses a round feeds.
inline constexpr int64_t kMaxGuessesPerRound = 16;

// A chain's buffers and results. The caller fills the inputs; the rounds
// write the prefix and every pick into `sequence` (the guesses read it), and
// the picks into `tokens`.
struct ChainRounds {
  // Inputs.
  // int64 [>= position + prefix + steps + guesses + 2]: the generation by
  // position, valid below the prefix's first position.
  at::Tensor sequence;
  at::Tensor tokens;    // int64 [>= prefix + steps + guesses + 1]: the prefix in [0, prefix)
  at::Tensor position;  // [1] int64: the prefix's first position
  at::Tensor noise;     // [steps, vocab] float32 (ChainNoise()), or undefined where the pick draws none
  // Outputs.
  at::Tensor rows;          // [steps, width]: the picks' rows; undefined where the pick gives none
  at::Tensor later_rounds;  // [1] int64: the rounds after the first (each one forward of 1 + guesses tokens)
};

// A causal forward of tokens [k] at the chain's slots offset .. offset + k
// - 1 from the prefix's first and at positions position .. (offset,
// position: [1] int64 on the device; position is the prefix's first plus
// offset), each token seeing every slot up to its own. Returns its logits
// [k, vocab] and, where the pick reads them, the hidden states behind them
// [k, hidden] (else undefined).
using FeedRound = std::function<absl::StatusOr<std::pair<at::Tensor, at::Tensor>>(
    const at::Tensor& tokens, const at::Tensor& offset, const at::Tensor& position)>;

// How the rounds past the chain's end are skipped: the host reads the picks
// so far back before each round, or (while a CUDA graph is captured) each
// round is a conditional node nested in the one before, set by the round
// before's bookkeeping (fused::AdvanceRound, CudaGraph::BeginIfSet).
// Where the conditional cannot be made (the capture's eager run), every round
// runs, and those past the end leave the chain as it was.
enum class RoundSkip { kReadBack, kConditional };

// Unimplemented for what rounds do not serve (a pick that stops: a cut
// chain wants its stop observed pick by pick), InvalidArgument for bad
// arguments.
absl::Status CheckRounds(int64_t prefix, int64_t steps, const ChainPick& pick, const ChainGuess& guess);

// The rounds of a chain of `steps` picks after `prefix` tokens, over `rounds`.
absl::Status DraftInRounds(int64_t prefix, int64_t steps, const ChainPick& pick, const ChainGuess& guess,
                           ChainRounds& rounds, const FeedRound& feed, RoundSkip skip);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_DEVICE_CHAIN_ROUNDS_H_
