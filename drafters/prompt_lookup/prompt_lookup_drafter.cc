#include "drafters/prompt_lookup/prompt_lookup_drafter.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/device/kernel_launch.h"
#include "framework/device_transfer.h"

#ifdef SPECLAB_WITH_CUDA
#include "drafters/prompt_lookup/cuda/ngram_kernel.h"
#endif

namespace speclab {

std::optional<int64_t> LookupFrom(absl::Span<const int32_t> sequence, int max_ngram) {
  const int64_t length = static_cast<int64_t>(sequence.size());
  for (int n = std::min<int64_t>(max_ngram, length - 1); n >= 1; --n) {
    absl::Span<const int32_t> key = sequence.subspan(length - n);
    for (int64_t start = 0; start < length - n; ++start) {  // never the trailing key itself
      if (std::equal(key.begin(), key.end(), sequence.begin() + start)) return start + n;
    }
  }
  return std::nullopt;
}

std::vector<int32_t> LookupContinuation(absl::Span<const int32_t> sequence, int max_ngram, int max_tokens) {
  const std::optional<int64_t> from = LookupFrom(sequence, max_ngram);
  if (!from) return {};
  const int64_t to = std::min<int64_t>(static_cast<int64_t>(sequence.size()), *from + max_tokens);
  return std::vector<int32_t>(sequence.begin() + *from, sequence.begin() + to);
}

std::vector<std::vector<int32_t>> LookupCandidates(absl::Span<const int32_t> sequence, int max_ngram, int max_tokens,
                                                   int max_candidates) {
  const int64_t length = static_cast<int64_t>(sequence.size());
  std::vector<std::vector<int32_t>> out;
  for (int n = std::min<int64_t>(max_ngram, length - 1); n >= 1; --n) {
    absl::Span<const int32_t> key = sequence.subspan(length - n);
    for (int64_t start = 0; start < length - n; ++start) {  // never the trailing key itself
      if (static_cast<int>(out.size()) >= max_candidates) return out;
      if (!std::equal(key.begin(), key.end(), sequence.begin() + start)) continue;
      const int64_t from = start + n, to = std::min(length, from + max_tokens);
      std::vector<int32_t> continuation(sequence.begin() + from, sequence.begin() + to);
      if (!continuation.empty() && std::find(out.begin(), out.end(), continuation) == out.end())
        out.push_back(std::move(continuation));
    }
  }
  return out;
}

std::vector<int32_t> FixedLengthContinuation(absl::Span<const int32_t> sequence, int max_ngram, int length) {
  const std::optional<int64_t> from = LookupFrom(sequence, max_ngram);
  const int64_t n = static_cast<int64_t>(sequence.size());
  std::vector<int32_t> drafts;
  for (int64_t j = 0; j < length; ++j) {
    const int64_t at = from ? *from + j : -1;
    drafts.push_back(at < 0 ? sequence.back() : at < n ? sequence[at] : drafts[at - n]);
  }
  return drafts;
}

absl::Status PromptLookupDrafter::Reset(absl::Span<const int32_t> prompt, const TargetFeatures&) {
  const int64_t n = static_cast<int64_t>(prompt.size());
  if (!device_context_.defined() || device_context_.size(0) < std::max(capacity_, n))
    device_context_ = at::zeros({std::max(capacity_, n)}, at::TensorOptions().dtype(at::kLong).device(device_));
  device_context_.narrow(0, 0, n).copy_(LongsToDevice(std::vector<int64_t>(prompt.begin(), prompt.end()), device_));
  return absl::OkStatus();
}

absl::Status PromptLookupDrafter::BeginStep(absl::Span<const int32_t> context) {
  context_.assign(context.begin(), context.end());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> PromptLookupDrafter::Continuation(const TokenTree& tree, int node,
                                                                       int max_tokens) {
  return LookupContinuation(SequenceThrough(context_, tree, node), max_ngram_, std::min(max_tokens, num_pred_tokens_));
}

absl::StatusOr<std::vector<std::vector<int32_t>>> PromptLookupDrafter::Continuations(const TokenTree& tree, int node,
                                                                                     int max_tokens,
                                                                                     int max_candidates) {
  return LookupCandidates(SequenceThrough(context_, tree, node), max_ngram_, std::min(max_tokens, num_pred_tokens_), max_candidates);
}

absl::StatusOr<at::Tensor> PromptLookupDrafter::ContinuationAt(const DeviceRoot& root, int length) {
  if (!device_context_.defined()) return absl::FailedPreconditionError("prompt_lookup: ContinuationAt before Reset");
  if (length < 0) return absl::InvalidArgumentError(absl::StrCat("prompt_lookup: draft length ", length));
  if (length > num_pred_tokens_)  // the engine then steps on the host, where num_pred_tokens caps each draft
    return absl::UnimplementedError(absl::StrCat("prompt_lookup: the length policy asks for ", length,
                                                 " tokens a step, num_pred_tokens allows ", num_pred_tokens_));
  // Room for the root, the token before it and the drafts at the host's bound on their positions.
  const int64_t need = root.position.max_start + 2 + length;
  if (device_context_.size(0) < need) {
    at::Tensor grown = at::zeros({std::max(need, 2 * device_context_.size(0))}, device_context_.options());
    grown.narrow(0, 0, device_context_.size(0)).copy_(device_context_);
    device_context_ = grown;
  }
  const at::Tensor last_two = root.last_two.to(device_context_.device(), at::kLong).contiguous();
  const at::Tensor start = root.position.start.to(device_context_.device(), at::kLong).contiguous();
  at::Tensor out = at::empty({length + 1}, device_context_.options());
#ifdef SPECLAB_WITH_CUDA
  if (device_context_.is_cuda()) {
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device_context_.device(), "prompt_lookup: n-gram", [&](void* stream) {
      return prompt_lookup::LaunchNgramContinuation(device_context_.data_ptr<int64_t>(), device_context_.size(0),
                                                    last_two.data_ptr<int64_t>(), start.data_ptr<int64_t>(),
                                                    max_ngram_, length, out.data_ptr<int64_t>(), stream);
    }));
    return out;
  }
#endif
  if (!device_context_.is_cpu())
    return absl::UnimplementedError(absl::StrCat("prompt_lookup: no device-rooted continuations on ", device_.str()));
  // The same rule on the host (the CPU runs tests): LookupFrom and the fill.
  int64_t* context = device_context_.data_ptr<int64_t>();
  const int64_t s = start.item<int64_t>();
  context[s] = last_two.data_ptr<int64_t>()[0];
  context[s + 1] = last_two.data_ptr<int64_t>()[1];
  const std::vector<int32_t> sequence(context, context + s + 2);
  const std::vector<int32_t> drafts = FixedLengthContinuation(sequence, max_ngram_, length);
  int64_t* tokens = out.data_ptr<int64_t>();
  tokens[0] = sequence.back();
  for (int j = 0; j < length; ++j) tokens[1 + j] = context[s + 2 + j] = drafts[j];
  return out;
}

absl::StatusOr<DeviceContinuations> PromptLookupDrafter::ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                                         int max_candidates) {
  if (!root.context.defined())
    return absl::UnimplementedError("prompt_lookup: the step handed over no context on the device");
  if (max_tokens < 1 || max_candidates < 1)
    return absl::InvalidArgumentError(absl::StrCat("prompt_lookup: ", max_candidates, " candidates of ", max_tokens,
                                                   " tokens"));
  const int tokens = std::min(max_tokens, num_pred_tokens_);  // as Continuations()
  const c10::Device device = root.context.device();
  const at::Tensor context = root.context.to(at::kLong).contiguous();
  const at::Tensor last_two = root.last_two.to(device, at::kLong).contiguous();
  const at::Tensor start = root.position.start.to(device, at::kLong).contiguous();
#ifdef SPECLAB_WITH_CUDA
  if (device.is_cuda()) {
    if (max_candidates > prompt_lookup::kMaxCandidates)
      return absl::UnimplementedError(absl::StrCat("prompt_lookup: the device lookup keeps at most ",
                                                   prompt_lookup::kMaxCandidates, " candidates, the builder asks ",
                                                   max_candidates));
    DeviceContinuations out{.tokens = at::empty({max_candidates, max_tokens}, context.options()),
                            .lengths = at::empty({max_candidates}, context.options())};
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device, "prompt_lookup: candidates", [&](void* stream) {
      return prompt_lookup::LaunchNgramCandidates(context.data_ptr<int64_t>(), last_two.data_ptr<int64_t>(),
                                                  start.data_ptr<int64_t>(), max_ngram_, tokens, max_tokens,
                                                  max_candidates, out.tokens.data_ptr<int64_t>(),
                                                  out.lengths.data_ptr<int64_t>(), stream);
    }));
    return out;
  }
#endif
  if (!device.is_cpu())
    return absl::UnimplementedError(absl::StrCat("prompt_lookup: no device-rooted candidates on ", device.str()));
  // The same rule on the host (the CPU runs tests).
  const std::vector<int32_t> sequence = HostSequence(context, last_two, start);
  return ToDeviceContinuations(LookupCandidates(sequence, max_ngram_, tokens, max_candidates), max_candidates,
                               max_tokens, sequence.back(), device);
}

namespace {

// FixedLengthContinuation() of sequence[0..root] as `count` tokens, the
// rule ContinuationAt() follows: its kernel on CUDA (which also writes the
// guesses past the root, as a guess may), a host loop elsewhere.
at::Tensor NgramGuess(const std::tuple<int64_t>& params, const at::Tensor& sequence, const at::Tensor& root,
                      int64_t count) {
  const int64_t max_ngram = std::get<0>(params);
#ifdef SPECLAB_WITH_CUDA
  if (sequence.is_cuda()) {
    at::Tensor out = at::empty({count + 1}, sequence.options());
    kernel_launch::Check(prompt_lookup::LaunchNgramGuess(sequence.data_ptr<int64_t>(), sequence.size(0),
                                                         root.data_ptr<int64_t>(), static_cast<int>(max_ngram),
                                                         static_cast<int>(count), out.data_ptr<int64_t>(),
                                                         kernel_launch::Stream(sequence)),
                         "prompt_lookup: n-gram guess");
    return out.narrow(0, 1, count);
  }
#endif
  const int64_t end = root.item<int64_t>() + 1;
  const at::Tensor host = sequence.narrow(0, 0, end).to(at::kCPU, at::kLong).contiguous();
  const std::vector<int32_t> drafts = FixedLengthContinuation(
      std::vector<int32_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + end), static_cast<int>(max_ngram),
      static_cast<int>(count));
  return LongsToDevice(std::vector<int64_t>(drafts.begin(), drafts.end()), sequence.device());
}

}  // namespace

absl::StatusOr<ChainGuess> PromptLookupDrafter::GuessOf(int count) {
  if (count < 1 || count > num_pred_tokens_)
    return absl::UnimplementedError(absl::StrCat("prompt_lookup: ", count, " guesses a round, num_pred_tokens allows ",
                                                 num_pred_tokens_));
  if (device_.is_cuda() && !kernel_launch::Enabled())
    return absl::UnimplementedError("prompt_lookup: its guess on CUDA is its n-gram kernel, and kernels are off");
  return ChainGuess::Of(count, &NgramGuess, std::make_tuple(int64_t{max_ngram_}));
}

namespace {

const bool kRegistered = DrafterRegistry::Add({
    .name = "prompt_lookup",
    .description = "n-gram match in the prompt and generated text (PLD); gives tokens only, every match as a tree "
                   "with the trie builder",
    .lossless = "-",
    .create = [](Options& options, const DrafterEnvironment& env) -> absl::StatusOr<std::unique_ptr<Drafter>> {
      ASSIGN_OR_RETURN(int64_t max_ngram, options.GetInt("max_ngram_size", 3));
      ASSIGN_OR_RETURN(int64_t num_pred, options.GetInt("num_pred_tokens", 10));
      if (max_ngram < 1) return options.Error("max_ngram_size", "expected an integer >= 1");
      if (num_pred < 1) return options.Error("num_pred_tokens", "expected an integer >= 1");
      return std::unique_ptr<Drafter>(std::make_unique<PromptLookupDrafter>(
          static_cast<int>(max_ngram), static_cast<int>(num_pred), env.device, env.kv_capacity));
    },
});

}  // namespace
}  // namespace speclab
