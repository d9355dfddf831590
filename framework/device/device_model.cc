#include "framework/device/device_model.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/device/chain_rounds.h"
#include "framework/device/device_length_stop.h"
#include "framework/error_text.h"
#include "framework/model/fused_ops.h"

namespace speclab {

DeviceModel* DeviceFormOf(LanguageModel& model) { return dynamic_cast<DeviceModel*>(&model); }

ChainPick ChainPick::StoppedBy(const DeviceLengthStop& stop, FactsLayout layout) const {
  ChainPick stopped = *this;
  stopped.key_ = absl::StrCat(key_, "|", stop.key(), "@", layout.columns, "r", static_cast<int>(layout.row));
  stopped.stop_ = &stop;
  stopped.facts_ = layout;
  return stopped;
}

ChainPick ChainPick::RowWise() const {
  ChainPick rows = *this;
  rows.key_ = absl::StrCat(key_, "+rowwise");
  rows.row_wise_ = true;
  return rows;
}

ChainPick::StopState ChainPick::StartStop(c10::Device device) const {
  const auto options = at::TensorOptions().device(device);
  return {.go = at::ones({1}, options.dtype(at::kBool)), .kept = at::zeros({1}, options.dtype(at::kLong))};
}

void ChainPick::ObserveStop(const at::Tensor& rows, StopState& state, std::optional<uint64_t> next) const {
  const at::Tensor facts = rows.narrow(1, rows.size(1) - facts_.columns, facts_.columns);
  fused::AdvanceStop(state.go, state.kept,
                     stop_->Stops(FactsOfColumns(facts, facts_.row)).narrow(0, rows.size(0) - 1, 1), next);
}

namespace {

absl::StatusOr<ChainResult> ForwardEach(LanguageModel& model, const at::Tensor& first, int64_t position, int64_t steps,
                                        const ChainPick& pick) {
  if (!first.defined() || first.dim() != 1 || first.size(0) != 1)
    return absl::InvalidArgumentError("ForwardChain: the first token must be a [1] tensor");
  return PickEach(
      first, steps, model.config().vocab_size, pick,
      [&](int64_t i, const at::Tensor& token) {
        return model.Forward(token, at::full({1}, position + i, first.options().dtype(at::kLong)), at::Tensor());
      },
      /*noise=*/nullptr, [&] { return model.HiddenStates(-1); });
}

// Commits every tentative slot.
absl::Status CommitAll(LanguageModel& model) {
  std::vector<int64_t> slots(model.tentative_length());
  std::iota(slots.begin(), slots.end(), 0);
  return model.Commit(slots);
}

// The default device-positioned forms: reads `start` back and makes the slots
// below it the committed prefix. Returns start.
absl::StatusOr<int64_t> SettleAt(LanguageModel& model, const DevicePosition& at, const at::Tensor& tokens,
                                 const char* what) {
  if (!tokens.defined() || tokens.dim() != 1 || tokens.size(0) < 1)
    return absl::InvalidArgumentError(absl::StrCat(what, ": tokens must be a non-empty [n] tensor"));
  if (!at.start.defined() || at.start.numel() != 1)
    return absl::InvalidArgumentError(absl::StrCat(what, ": start must be a [1] int64 tensor"));
  const int64_t start = at.start.to(at::kCPU).item<int64_t>();  // the synchronisation
  const int64_t written = model.committed_length() + model.tentative_length();
  if (start < std::max<int64_t>(at.min_start, 0) || start > written || start > at.max_start)
    return absl::InvalidArgumentError(absl::StrCat(what, ": start ", start, " outside [",
                                                   std::max<int64_t>(at.min_start, 0), ", ",
                                                   std::min(written, at.max_start),
                                                   "] (min_start, and the slots written so far or max_start)"));
  RETURN_IF_ERROR(CommitAll(model));
  RETURN_IF_ERROR(model.Truncate(start));
  return start;
}

at::Tensor Positions(int64_t from, int64_t count, const at::Tensor& like) {
  return at::arange(from, from + count, like.options().dtype(at::kLong));
}

// Checks the levels and pick of a growth.
absl::Status ValidateGrowth(int64_t levels, const LevelPick& pick) {
  if (levels < 1) return absl::InvalidArgumentError(absl::StrCat("ForwardLevels: levels must be >= 1, got ", levels));
  if (!pick.defined()) return absl::InvalidArgumentError("ForwardLevels: pick has no function");
  if (pick.width() < 1) return absl::InvalidArgumentError(absl::StrCat("ForwardLevels: width must be >= 1, got ", pick.width()));
  return absl::OkStatus();
}

// Checks ForwardLevels' arguments (every implementation's).
absl::Status ValidateLevels(const at::Tensor& prefix, int64_t levels, const LevelPick& pick) {
  if (!prefix.defined() || prefix.dim() != 1 || prefix.size(0) < 1)
    return absl::InvalidArgumentError("ForwardLevels: the prefix must be a non-empty [c] tensor");
  return ValidateGrowth(levels, pick);
}

// The nodes of a level, each checked against the pick's width; depths are
// given at every level or at none (`free`: level 0's choice).
absl::Status CheckChoice(const LevelPick::Choice& choice, const LevelPick& pick, int64_t level, bool free,
                         bool stops) {
  for (const at::Tensor* t : {&choice.tokens, &choice.parents})
    if (!t->defined() || t->dim() != 1 || t->size(0) != pick.width())
      return absl::InvalidArgumentError(absl::StrCat("ForwardLevels: pick '", pick.key(), "' at level ", level,
                                                     " must give tokens and parents of [", pick.width(), "]"));
  if (choice.depths.defined() != free ||
      (free && (choice.depths.dim() != 1 || choice.depths.size(0) != pick.width())))
    return absl::InvalidArgumentError(absl::StrCat(
        "ForwardLevels: pick '", pick.key(), "' at level ", level,
        free ? absl::StrCat(" must give depths of [", pick.width(), "], as level 0 did")
             : std::string(" gives depths where level 0 gave none")));
  if (choice.go.defined() != stops)
    return absl::InvalidArgumentError(absl::StrCat("ForwardLevels: pick '", pick.key(), "' at level ", level,
                                                   stops ? " must give go, as level 0 did"
                                                         : " gives go where level 0 gave none"));
  if (stops && (choice.go.dim() != 1 || choice.go.size(0) != 1 || choice.go.scalar_type() != at::kBool))
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardLevels: pick '", pick.key(), "' at level ", level, " must give go as bool [1]"));
  return absl::OkStatus();
}

}  // namespace

at::Tensor ParentsInFeedingOrder(const LevelPick::Choice& choice, int64_t level, int64_t width) {
  const at::Tensor parents = choice.parents.to(at::kLong);
  if (choice.depths.defined() || level == 1) return parents;
  return parents + (1 + (level - 2) * width);
}

at::Tensor ChainNoise(const ChainPick& pick, int64_t steps, int64_t vocab, c10::Device device) {
  if (pick.noise_generator() == nullptr) return at::Tensor();
  return at::empty({steps, vocab}, at::TensorOptions().device(device).dtype(at::kFloat))
      .exponential_(1.0, *pick.noise_generator());
}

absl::StatusOr<ChainResult> PickEach(const at::Tensor& first, int64_t steps, int64_t vocab, const ChainPick& pick,
                                     const LogitsAfter& logits_after, const at::Tensor* given_noise,
                                     const HiddenNow& hidden_now) {
  if (steps < 1) return absl::InvalidArgumentError(absl::StrCat("ForwardChain: steps must be >= 1, got ", steps));
  if (pick.reads_hidden() && !hidden_now)
    return absl::InvalidArgumentError("ForwardChain: the pick reads hidden states, which this chain does not give");
  const at::Tensor noise = given_noise != nullptr ? *given_noise : ChainNoise(pick, steps, vocab, first.device());
  std::vector<at::Tensor> tokens{first.to(at::kLong).view({1})}, rows;
  ChainPick::StopState stop;
  if (pick.stops()) stop = pick.StartStop(first.device());
  for (int64_t i = 0; i < steps; ++i) {
    ASSIGN_OR_RETURN(at::Tensor logits, logits_after(i, tokens.back()));
    at::Tensor hidden;
    if (pick.reads_hidden()) {
      ASSIGN_OR_RETURN(hidden, hidden_now());
      hidden = hidden.narrow(0, hidden.size(0) - 1, 1).to(at::kFloat);
    }
    auto [token, row] = pick(logits, noise.defined() ? noise.narrow(0, i, 1) : at::Tensor(), hidden);
    tokens.push_back(token.view({1}));
    if (row.defined()) rows.push_back(row);
    if (pick.stops()) pick.ObserveStop(at::cat(rows), stop);
  }
  ChainResult result{.tokens = at::cat(tokens), .kept = stop.kept};
  if (!rows.empty()) result.rows = at::cat(rows);
  return result;
}

at::Tensor LevelNoise(const LevelPick& pick, int64_t levels, int64_t vocab, c10::Device device) {
  if (pick.noise_generator() == nullptr) return at::Tensor();
  return at::empty({levels + 1, pick.width(), vocab}, at::TensorOptions().device(device).dtype(at::kFloat))
      .exponential_(1.0, *pick.noise_generator());
}

absl::StatusOr<at::Tensor> DeviceModel::ForwardAt(const at::Tensor& tokens, const DevicePosition& at) {
  try {
    ASSIGN_OR_RETURN(const int64_t start, SettleAt(model(), at, tokens, "ForwardAt"));
    ASSIGN_OR_RETURN(at::Tensor logits, model().Forward(tokens, Positions(start, tokens.size(0), tokens), at::Tensor()));
    RETURN_IF_ERROR(CommitAll(model()));
    return logits;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardAt: ", ErrorText(e)));
  }
}

absl::StatusOr<ChainResult> DeviceModel::ForwardChainAt(const at::Tensor& prefix, const DevicePosition& at,
                                                          int64_t steps, const ChainPick& pick) {
  try {
    ASSIGN_OR_RETURN(const int64_t start, SettleAt(model(), at, prefix, "ForwardChainAt"));
    const int64_t fed_first = prefix.size(0) - 1;  // fed before the chain proper
    if (fed_first > 0)
      RETURN_IF_ERROR(model().Forward(prefix.narrow(0, 0, fed_first), Positions(start, fed_first, prefix), at::Tensor()).status());
    ASSIGN_OR_RETURN(ChainResult chain, ForwardChain(prefix.narrow(0, fed_first, 1), start + fed_first, steps, pick));
    RETURN_IF_ERROR(CommitAll(model()));
    chain.tokens = at::cat({prefix.narrow(0, 0, fed_first).to(at::kLong), chain.tokens});
    return chain;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardChainAt: ", ErrorText(e)));
  }
}

absl::StatusOr<ChainResult> DeviceModel::ForwardChainInRoundsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                                  int64_t steps, const ChainPick& pick,
                                                                  const ChainGuess& guess, const at::Tensor& context) {
  try {
    if (!prefix.defined() || prefix.dim() != 1 || !at.start.defined() || at.start.numel() != 1 ||
        !context.defined() || context.dim() != 1)
      return absl::InvalidArgumentError("ForwardChainInRoundsAt: the prefix and the context must be [n] and start [1]");
    const int64_t c = prefix.size(0);
    RETURN_IF_ERROR(CheckRounds(c, steps, pick, guess));
    const auto longs = prefix.options().dtype(at::kLong);
    ChainRounds rounds{.sequence = at::zeros({at.max_start + c + steps + guess.count() + 2}, longs),
                       .tokens = at::zeros({c + steps + guess.count() + 1}, longs),
                       .position = at.start.to(at::kLong).reshape({1}),
                       .noise = ChainNoise(pick, steps, model().config().vocab_size, prefix.device())};
    const int64_t known = std::min(context.size(0), rounds.sequence.size(0));
    rounds.sequence.narrow(0, 0, known).copy_(context.narrow(0, 0, known));
    rounds.tokens.narrow(0, 0, c).copy_(prefix);
    const FeedRound feed = [&](const at::Tensor& tokens, const at::Tensor&, const at::Tensor& position)
        -> absl::StatusOr<std::pair<at::Tensor, at::Tensor>> {
      const DevicePosition round_at{.start = position, .max_start = at.max_start + c - 1 + steps,
                                    .min_start = at.min_start};
      ASSIGN_OR_RETURN(at::Tensor logits, ForwardAt(tokens, round_at));
      if (!pick.reads_hidden()) return std::make_pair(logits, at::Tensor());
      ASSIGN_OR_RETURN(at::Tensor hidden, model().HiddenStates(-1));
      return std::make_pair(logits, hidden);
    };
    RETURN_IF_ERROR(DraftInRounds(c, steps, pick, guess, rounds, feed, RoundSkip::kReadBack));
    ChainResult chain{.tokens = rounds.tokens.narrow(0, 0, c + steps).clone()};
    if (rounds.rows.defined()) chain.rows = rounds.rows.clone();
    return chain;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardChainInRoundsAt: ", ErrorText(e)));
  }
}

absl::StatusOr<at::Tensor> DeviceModel::ForwardTreeAt(const at::Tensor& tokens, const at::Tensor& depths,
                                                        const at::Tensor& mask, const DevicePosition& at) {
  try {
    ASSIGN_OR_RETURN(const int64_t start, SettleAt(model(), at, tokens, "ForwardTreeAt"));
    const int64_t n = tokens.size(0);
    if (!depths.defined() || depths.dim() != 1 || depths.size(0) != n || !mask.defined() || mask.dim() != 2 ||
        mask.size(0) != n || mask.size(1) != n)
      return absl::InvalidArgumentError(absl::StrCat("ForwardTreeAt: depths must be [", n, "] and mask [", n, ", ", n,
                                                     "] for ", n, " tokens"));
    return model().Forward(tokens, depths.to(at::kLong) + start, mask);  // the nodes stay tentative until CompactPathAt
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardTreeAt: ", ErrorText(e)));
  }
}

absl::Status DeviceModel::CompactPathAt(const at::Tensor& nodes, const DevicePosition& at) {
  try {
    if (!nodes.defined() || nodes.dim() != 1 || !at.start.defined() || at.start.numel() != 1)
      return absl::InvalidArgumentError("CompactPathAt: nodes must be [m] and start [1]");
    const at::Tensor host = at::cat({at.start.reshape({1}), nodes}).to(at::kCPU, at::kLong);  // the synchronisation
    const int64_t* data = host.data_ptr<int64_t>();
    if (data[0] != model().committed_length())
      return absl::FailedPreconditionError(absl::StrCat("CompactPathAt: start ", data[0],
                                                        " is not where the last ForwardTreeAt put the tree (",
                                                        model().committed_length(), ")"));
    std::vector<int64_t> kept{0};  // the root
    for (int64_t i = 0; i < nodes.size(0) && data[1 + i] > kept.back(); ++i) kept.push_back(data[1 + i]);
    if (kept.back() >= model().tentative_length())
      return absl::InvalidArgumentError(
          absl::StrCat("CompactPathAt: node ", kept.back(), " is not in the tree of ", model().tentative_length()));
    return model().Commit(kept);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("CompactPathAt: ", ErrorText(e)));
  }
}

absl::StatusOr<LevelsKept> DeviceModel::ForwardLevelsAt(const at::Tensor& prefix, const DevicePosition& at,
                                                          int64_t levels, const LevelPick& pick) {
  try {
    ASSIGN_OR_RETURN(const int64_t start, SettleAt(model(), at, prefix, "ForwardLevelsAt"));
    return ForwardLevels(prefix, start, levels, pick);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardLevelsAt: ", ErrorText(e)));
  }
}

absl::StatusOr<ChainResult> DeviceModel::ForwardChain(const at::Tensor& first, int64_t position, int64_t steps,
                                                        const ChainPick& pick) {
  // Picks are ATen code: their errors arrive as exceptions.
  try {
    return ForwardEach(model(), first, position, steps, pick);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardChain: ", ErrorText(e)));
  }
}

absl::StatusOr<LevelsKept> GrowLevels(const at::Tensor& root_logits, int64_t tentative, int64_t levels,
                                      const LevelPick& pick, const FeedLevel& feed, const at::Tensor* given_noise) {
  RETURN_IF_ERROR(ValidateGrowth(levels, pick));
  try {
    const int64_t m = pick.width();
    const at::Tensor noise = given_noise != nullptr
                                 ? *given_noise
                                 : LevelNoise(pick, levels, root_logits.size(-1), root_logits.device());
    const auto level_noise = [&](int64_t level) { return noise.defined() ? noise[level] : at::Tensor(); };
    LevelPick::Choice choice = pick(0, root_logits, {}, level_noise(0));
    const bool free = choice.depths.defined();
    const bool stops = choice.go.defined();
    RETURN_IF_ERROR(CheckChoice(choice, pick, 0, free, stops));
    LevelsKept kept{std::move(choice.kept)};
    // A node sees what its parent sees, and itself: `visible` holds the rows
    // of the level being fed, over every tentative slot up to its own; with
    // free parents `fed` holds every fed node's row (the root's first).
    const auto bools = root_logits.options().dtype(at::kBool);
    at::Tensor fed = at::ones({1, tentative}, bools);
    at::Tensor visible = at::cat({at::ones({m, tentative}, bools), at::eye(m, bools)}, 1);
    for (int64_t level = 1; level <= levels; ++level) {
      LevelFeed step{.tokens = choice.tokens.to(at::kLong), .parents = ParentsInFeedingOrder(choice, level, m),
                     .visible = visible, .level = level, .at_level_depth = !free};
      step.depths = free ? choice.depths.to(at::kLong) : at::full({m}, level, step.tokens.options());
      ASSIGN_OR_RETURN(at::Tensor logits, feed(step));
      const std::vector<at::Tensor> carry = std::move(choice.carry);
      choice = pick(level, logits, carry, level_noise(level));
      if (stops && choice.kept.size() != kept.front().size())
        return absl::InvalidArgumentError(absl::StrCat("ForwardLevels: pick '", pick.key(), "' gives go, so level ",
                                                       level, " must keep what level 0 keeps"));
      kept.push_back(std::move(choice.kept));
      if (level == levels) break;
      RETURN_IF_ERROR(CheckChoice(choice, pick, level, free, stops));
      if (free) {
        fed = at::cat({at::cat({fed, at::zeros({fed.size(0), m}, bools)}, 1), visible});
        visible = at::cat({fed.index_select(0, choice.parents), at::eye(m, bools)}, 1);
      } else {
        visible = at::cat({visible.index_select(0, choice.parents), at::eye(m, bools)}, 1);
      }
    }
    if (stops) std::fill(kept.begin(), kept.end(), kept.back());  // the draft when growth ended
    return kept;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardLevels: ", ErrorText(e)));
  }
}

absl::StatusOr<LevelsKept> DeviceModel::ForwardLevels(const at::Tensor& prefix, int64_t position, int64_t levels,
                                                        const LevelPick& pick) {
  RETURN_IF_ERROR(ValidateLevels(prefix, levels, pick));
  try {
    const int64_t c = prefix.size(0);
    ASSIGN_OR_RETURN(at::Tensor prefix_logits,
                     model().Forward(prefix.to(at::kLong), Positions(position, c, prefix), at::Tensor()));
    return GrowLevels(prefix_logits.narrow(0, c - 1, 1), model().tentative_length(), levels, pick,
                      [&](const LevelFeed& level) {
                        return model().Forward(level.tokens, level.depths + (position + c - 1), level.visible);
                      });
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ForwardLevels: ", ErrorText(e)));
  }
}

}  // namespace speclab
