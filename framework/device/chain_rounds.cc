#include "framework/device/chain_rounds.h"

#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/model/cuda_graph.h"
#include "framework/model/fused_ops.h"

namespace speclab {
namespace {

// A round's picks from its rows [g + 1, vocab] (float32): one call of a
// row-wise pick, else one call a row. Returns the tokens [g + 1] int64 and
// the rows [g + 1, width] (undefined where the pick gives none).
std::pair<at::Tensor, at::Tensor> PickRound(const ChainPick& pick, const at::Tensor& logits, const at::Tensor& noise,
                                            const at::Tensor& hidden) {
  if (pick.row_wise()) {
    auto [tokens, rows] = pick(logits, noise, hidden);
    return {tokens.to(at::kLong).reshape({logits.size(0)}), rows};
  }
  std::vector<at::Tensor> tokens, rows;
  for (int64_t j = 0; j < logits.size(0); ++j) {
    auto [token, row] = pick(logits.narrow(0, j, 1), noise.defined() ? noise.narrow(0, j, 1) : at::Tensor(),
                             hidden.defined() ? hidden.narrow(0, j, 1) : at::Tensor());
    tokens.push_back(token.to(at::kLong).view({1}));
    if (row.defined()) rows.push_back(row);
  }
  return {at::cat(tokens), rows.empty() ? at::Tensor() : at::cat(rows)};
}

}  // namespace

absl::Status CheckRounds(int64_t prefix, int64_t steps, const ChainPick& pick, const ChainGuess& guess) {
  if (!pick.defined() || !guess.defined())
    return absl::InvalidArgumentError("a chain in rounds needs a pick and a guess");
  if (pick.stops())
    return absl::UnimplementedError("a chain in rounds does not observe a length policy's stop pick by pick");
  if (prefix < 1 || steps < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("a chain in rounds needs a prefix and steps >= 1, got ", prefix, " and ", steps));
  if (guess.count() < 1 || guess.count() > kMaxGuessesPerRound)
    return absl::InvalidArgumentError(absl::StrCat("guess '", guess.key(), "' gives ", guess.count(),
                                                   " tokens a round; expected 1 to ", kMaxGuessesPerRound));
  return absl::OkStatus();
}

absl::Status DraftInRounds(int64_t prefix, int64_t steps, const ChainPick& pick, const ChainGuess& guess,
                           ChainRounds& rounds, const FeedRound& feed, RoundSkip skip) {
  RETURN_IF_ERROR(CheckRounds(prefix, steps, pick, guess));
  const int64_t c = prefix, g = guess.count();
  const auto longs = rounds.tokens.options();
  rounds.sequence.index_copy_(0, rounds.position + at::arange(c, longs), rounds.tokens.narrow(0, 0, c));
  // fused::AdvanceRound's state: picks so far, later rounds, the last token, its offset and position, noise rows.
  const at::Tensor state = fused::FirstRoundState(rounds.tokens, c, rounds.position, steps, g);
  const at::Tensor no_offset = at::zeros({1}, longs);
  at::Tensor rows;  // [steps + g + 1, width]: a round writes all its rows, the next overwrites those not kept
  std::optional<uint64_t> go_on;  // set by the round before
  std::vector<bool> nested;
  for (int64_t r = 0; r < steps; ++r) {
    if (r > 0 && skip == RoundSkip::kReadBack && state[0].item<int64_t>() >= steps) break;
    if (r > 0 && skip == RoundSkip::kConditional) nested.push_back(CudaGraph::BeginIfSet(go_on));
    const at::Tensor position = state.narrow(0, 4, 1);  // the chain's last token's
    const at::Tensor guesses = guess(rounds.sequence, position);
    if (!guesses.defined() || guesses.numel() != g || guesses.scalar_type() != at::kLong)
      return absl::InvalidArgumentError(absl::StrCat("guess '", guess.key(), "' must give int64 [", g, "]"));
    const at::Tensor last = r == 0 ? rounds.tokens.narrow(0, 0, c) : state.narrow(0, 2, 1);
    const at::Tensor fed = at::cat({last, guesses.view({g})});
    ASSIGN_OR_RETURN(const auto out, r == 0 ? feed(fed, no_offset, rounds.position)
                                            : feed(fed, state.narrow(0, 3, 1), position));
    const int64_t first = fed.size(0) - (g + 1);  // the row after the chain's last token
    const at::Tensor noise =
        rounds.noise.defined() ? rounds.noise.index_select(0, state.narrow(0, 5, g + 1)) : at::Tensor();
    const auto [picks, block] =
        PickRound(pick, out.first.narrow(0, first, g + 1).to(at::kFloat), noise,
                  pick.reads_hidden() ? out.second.narrow(0, first, g + 1).to(at::kFloat) : at::Tensor());
    if (block.defined() && !rows.defined()) rows = at::empty({steps + g + 1, block.size(1)}, block.options());
    go_on = skip == RoundSkip::kConditional && r + 1 < steps ? CudaGraph::NewCondition() : std::nullopt;
    fused::AdvanceRound(picks, guesses.view({g}), block, state, rounds.tokens, rounds.sequence, rows, c, steps,
                        /*later=*/r > 0, go_on);
  }
  CudaGraph::EndNested(nested);
  rounds.rows = rows.defined() ? rows.narrow(0, 0, steps) : at::Tensor();
  rounds.later_rounds = state.narrow(0, 1, 1);
  return absl::OkStatus();
}

}  // namespace speclab
