#include "drafters/lookahead/lookahead_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"

namespace speclab::lookahead {

LookaheadDrafter::LookaheadDrafter(LookaheadOptions options, uint64_t seed, int64_t eos, int64_t vocab)
    : o_(options),
      eos_(eos),
      random_(seed),
      pool_({.leader_length = 1, .follower_length = options.level - 1, .rows = 1 << 24, .columns = options.guess_set}),
      vocab_(vocab) {}

absl::Status LookaheadDrafter::Reset(absl::Span<const int32_t> prompt, const TargetFeatures&) {
  if (prompt.empty()) return absl::InvalidArgumentError("lookahead: empty prompt");
  pool_ = LruNgramTable(pool_.shape());
  if (o_.pool_from_prompt) pool_.Learn(prompt);
  prompt_.assign(prompt.begin(), prompt.end());
  // The first guesses: tokens of the prompt, as the authors' code draws them.
  std::vector<int32_t> initial((o_.level - 1) * o_.window);
  for (int32_t& token : initial) token = PromptToken();
  window_.emplace(o_.level - 1, o_.window, std::move(initial));
  standins_.resize(static_cast<size_t>(kStandInRows) * o_.window);
  for (int32_t& token : standins_) token = PromptToken();
  context_.assign(prompt.begin(), prompt.end());
  guesses_.reset();
  device_.reset();
  return absl::OkStatus();
}

absl::Status LookaheadDrafter::BeginStep(absl::Span<const int32_t> context) {
  if (context.size() < context_.size())
    return absl::FailedPreconditionError("lookahead: the context shrank between steps");
  if (o_.pool_from_prompt) pool_.Learn(context.subspan(context_.size()));
  context_.assign(context.begin(), context.end());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<int32_t>>> LookaheadDrafter::Continuations(const TokenTree& tree, int node,
                                                                                  int max_tokens,
                                                                                  int max_candidates) {
  const std::vector<int32_t> sequence = SequenceThrough(context_, tree, node);
  std::vector<std::vector<int32_t>> out;
  if (max_tokens < 1) return out;
  for (std::vector<int32_t> follower : pool_.Followers({sequence.back()})) {
    if (static_cast<int>(out.size()) >= max_candidates) break;
    if (static_cast<int>(follower.size()) > max_tokens) follower.resize(max_tokens);
    if (std::find(out.begin(), out.end(), follower) == out.end()) out.push_back(std::move(follower));
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> LookaheadDrafter::Continuation(const TokenTree& tree, int node, int max_tokens) {
  ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> best, Continuations(tree, node, max_tokens, 1));
  return best.empty() ? std::vector<int32_t>() : best.front();
}

absl::StatusOr<RiderTokens> LookaheadDrafter::Riders() {
  if (!window_) return absl::FailedPreconditionError("lookahead: Riders() before Reset()");
  return window_->Riders();
}

absl::Status LookaheadDrafter::RidersScored(const at::Tensor& logits) {
  const int64_t r = static_cast<int64_t>(o_.level - 1) * o_.window;
  if (logits.dim() != 2 || logits.size(0) != r)
    return absl::InternalError(absl::StrCat("lookahead: logits of ", logits.dim() == 2 ? logits.size(0) : -1,
                                            " riders for a window of ", r));
  // Jacobi iterations are greedy at every temperature: the guesses only draft.
  guesses_ = AsyncRead::Start(logits.slice(0, window_->last_level_begin()).argmax(-1));
  return absl::OkStatus();
}

absl::Status LookaheadDrafter::EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) {
  if (!guesses_) return absl::FailedPreconditionError("lookahead: a step ended before its riders were scored");
  const at::Tensor& host = guesses_->Wait();
  const int64_t* data = host.data_ptr<int64_t>();
  const std::vector<int32_t> guesses(data, data + host.numel());
  guesses_.reset();
  // A column's n-gram is the target's trajectory once every level after the
  // first has been guessed by it (the authors' fill phase).
  const int iteration = window_->iterations();
  const bool trajectories = iteration >= window_->levels() - 1;
  ASSIGN_OR_RETURN(std::vector<Ngram> ngrams, window_->Advance(guesses));
  if (trajectories)
    for (const Ngram& ngram : ngrams) pool_.Remember({ngram.key}, ngram.follower);
  // The n-grams keep an EOS guess; the window does not iterate past it.
  const int last = window_->levels() - 1;
  const int32_t* standins = standins_.data() + static_cast<size_t>(iteration % kStandInRows) * o_.window;
  for (int c = 0; c < window_->width(); ++c)
    if (window_->at(last, c) == eos_) window_->Replace(last, c, standins[c]);
  return absl::OkStatus();
}

absl::StatusOr<DeviceLookahead*> LookaheadDrafter::DeviceState(c10::Device device) {
  if (device_) {
    if (device_->riders().tokens.device() != device)
      return absl::InternalError(absl::StrCat("lookahead: a device step on ", device.str(), " after one on ",
                                              device_->riders().tokens.device().str()));
    return &*device_;
  }
  if (!window_) return absl::FailedPreconditionError("lookahead: a device step before Reset()");
  if (vocab_ < 1) return absl::UnimplementedError("lookahead: the target's vocabulary size is unknown");
  device_.emplace(*window_, pool_, static_cast<int64_t>(context_.size()), o_.pool_from_prompt, standins_, vocab_, eos_,
                  device);
  return &*device_;
}

absl::StatusOr<DeviceContinuations> LookaheadDrafter::ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                                      int max_candidates) {
  ASSIGN_OR_RETURN(DeviceLookahead * state, DeviceState(root.context.device()));
  return state->LearnAndBranch(root, max_tokens, max_candidates);
}

absl::StatusOr<at::Tensor> LookaheadDrafter::ContinuationAt(const DeviceRoot& root, int length) {
  ASSIGN_OR_RETURN(DeviceLookahead * state, DeviceState(root.context.device()));
  return state->LearnAndChain(root, length);
}

absl::StatusOr<DeviceRiders> LookaheadDrafter::RidersAt() {
  if (!device_) return absl::FailedPreconditionError("lookahead: riders asked on the device before its drafts");
  return device_->riders();
}

absl::Status LookaheadDrafter::RidersScoredAt(const at::Tensor& logits) {
  if (!device_) return absl::FailedPreconditionError("lookahead: riders scored on the device before its drafts");
  return device_->Advance(logits);
}

int32_t LookaheadDrafter::PromptToken() {
  std::uniform_int_distribution<size_t> pick(0, prompt_.size() - 1);
  return prompt_[pick(random_)];
}

namespace {

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  LookaheadOptions o;
  ASSIGN_OR_RETURN(o.window, options.GetIntIn("window", o.window, 1, 64));
  ASSIGN_OR_RETURN(o.level, options.GetIntIn("level", o.level, 2, 16));
  ASSIGN_OR_RETURN(o.guess_set, options.GetIntIn("guess_set", o.guess_set, 1, 256));
  ASSIGN_OR_RETURN(o.pool_from_prompt, options.GetBool("pool_from_prompt", o.pool_from_prompt));
  const int64_t eos = env.target != nullptr ? env.target->config().eos_token_id : -1;
  const int64_t vocab = env.target != nullptr ? env.target->config().vocab_size : -1;
  return std::unique_ptr<Drafter>(std::make_unique<LookaheadDrafter>(o, env.seed, eos, vocab));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "lookahead",
    .description = "lookahead decoding: a Jacobi window rides in the target's verification forward and fills an "
                   "n-gram pool whose n-grams after the root are the drafts; gives tokens only (trie builder)",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab::lookahead
