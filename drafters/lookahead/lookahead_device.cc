#include "drafters/lookahead/lookahead_device.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/device/kernel_launch.h"

#ifdef SPECLAB_WITH_CUDA
#include "drafters/lookahead/cuda/lookahead_kernel.h"
#endif

namespace speclab::lookahead {

DeviceLookahead::DeviceLookahead(const JacobiWindow& window, const LruNgramTable& pool, int64_t learned, bool learn,
                                 const std::vector<int32_t>& standins, int64_t vocab, int64_t eos,
                                 c10::Device device)
    : levels_(window.levels()), width_(window.width()), vocab_(vocab), eos_(eos), learn_(learn) {
  // The pool starts empty on the device; the rows the host learned (from
  // the prompt) go where their keys say.
  const int columns = pool.shape().columns;
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  followers_ = at::zeros({vocab, columns, levels_}, longs);
  stamps_ = at::zeros({vocab, columns}, longs);
  std::vector<int64_t> keys, followers, stamps;
  for (const auto& [key, row] : pool.Rows()) {
    if (key.size() != 1 || key[0] < 0 || key[0] >= vocab) continue;  // (tokens of the vocabulary only)
    keys.push_back(key[0]);
    const int64_t m = static_cast<int64_t>(row.size());
    for (int64_t c = 0; c < columns; ++c) {
      stamps.push_back(c < m ? m - c : 0);  // the most recent first: the largest stamp
      for (int t = 0; t < levels_; ++t) followers.push_back(c < m ? row[c][t] : 0);
    }
  }
  if (!keys.empty()) {
    const int64_t k = static_cast<int64_t>(keys.size());
    const at::Tensor rows = at::tensor(keys, at::kLong).to(device);
    followers_.index_copy_(0, rows, at::tensor(followers, at::kLong).reshape({k, columns, levels_}).to(device));
    stamps_.index_copy_(0, rows, at::tensor(stamps, at::kLong).reshape({k, columns}).to(device));
  }
  const RiderTokens host = window.Riders();
  clock_ = at::full({1}, columns, longs);  // past every stamp given
  learned_ = at::full({1}, learned, longs);
  window_ = at::tensor(std::vector<int64_t>(host.tokens.begin(), host.tokens.end()), at::kLong).to(device);
  standins_ = at::tensor(std::vector<int64_t>(standins.begin(), standins.end()), at::kLong)
                  .reshape({-1, width_})
                  .to(device);
  riders_ = ToDeviceRiders(host, window_);
}

PoolPointers DeviceLookahead::Pointers() {
  return {.followers = followers_.data_ptr<int64_t>(), .stamps = stamps_.data_ptr<int64_t>(),
          .clock = clock_.data_ptr<int64_t>(), .vocab = vocab_, .columns = static_cast<int>(stamps_.size(1)),
          .follower = levels_};
}

absl::StatusOr<DeviceContinuations> DeviceLookahead::LearnAndBranch(const DeviceRoot& root, int max_tokens,
                                                                    int max_candidates) {
  DeviceContinuations out;
  RETURN_IF_ERROR(Draft(root, max_tokens, max_candidates, &out, nullptr));
  return out;
}

absl::StatusOr<at::Tensor> DeviceLookahead::LearnAndChain(const DeviceRoot& root, int length) {
  DeviceContinuations best;
  at::Tensor chain;
  RETURN_IF_ERROR(Draft(root, length, 1, &best, &chain));
  return chain;
}

absl::Status DeviceLookahead::Draft(const DeviceRoot& root, int max_tokens, int max_candidates,
                                    DeviceContinuations* out, at::Tensor* chain) {
  if (max_tokens < 1 || max_candidates < 1)
    return absl::InvalidArgumentError(absl::StrCat("lookahead: ", max_candidates, " candidates of ", max_tokens,
                                                   " tokens"));
  const c10::Device device = window_.device();
  const at::Tensor context = root.context.to(device, at::kLong).contiguous();
  const at::Tensor last_two = root.last_two.to(device, at::kLong).contiguous();
  const at::Tensor start = root.position.start.to(device, at::kLong).contiguous();
  out->tokens = at::empty({max_candidates, max_tokens}, window_.options());
  out->lengths = at::empty({max_candidates}, window_.options());
  if (chain != nullptr) *chain = at::empty({max_tokens + 1}, window_.options());
  int64_t* chain_data = chain != nullptr ? chain->data_ptr<int64_t>() : nullptr;
#ifdef SPECLAB_WITH_CUDA
  if (device.is_cuda()) {
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device, "lookahead: pool", [&](void* stream) {
      return LaunchLearnAndBranch(Pointers(), context.data_ptr<int64_t>(), last_two.data_ptr<int64_t>(),
                                  start.data_ptr<int64_t>(), learned_.data_ptr<int64_t>(), learn_, max_tokens,
                                  max_candidates, out->tokens.data_ptr<int64_t>(), out->lengths.data_ptr<int64_t>(),
                                  chain_data, max_tokens, stream);
    }));
    return absl::OkStatus();
  }
#endif
  if (!device.is_cpu()) return absl::UnimplementedError(absl::StrCat("lookahead: no device form on ", device.str()));
  const int64_t* two = last_two.data_ptr<int64_t>();
  if (learn_)
    LearnText(Pointers(), context.data_ptr<int64_t>(), two, start.item<int64_t>(), learned_.data_ptr<int64_t>());
  int64_t* tokens = out->tokens.data_ptr<int64_t>();
  int64_t* lengths = out->lengths.data_ptr<int64_t>();
  BranchFromRoot(Pointers(), two[1], max_tokens, max_candidates, tokens, lengths);
  if (chain_data != nullptr) ChainOfFirst(tokens, lengths, two[1], max_tokens, chain_data);
  return absl::OkStatus();
}

absl::Status DeviceLookahead::Advance(const at::Tensor& logits) {
  const int64_t r = static_cast<int64_t>(levels_) * width_;
  if (logits.dim() != 2 || logits.size(0) != r || logits.size(1) != vocab_)
    return absl::InternalError(absl::StrCat("lookahead: logits [", logits.dim() == 2 ? logits.size(0) : -1, ", ",
                                            logits.dim() == 2 ? logits.size(1) : -1, "] for a window of ", r,
                                            " riders in a vocabulary of ", vocab_));
  const c10::Device device = window_.device();
  const int64_t* standins = standins_.data_ptr<int64_t>() + (iterations_ % standins_.size(0)) * width_;
  // A column's n-gram is the target's trajectory once every level after the
  // first has been guessed by it (the authors' fill phase).
  const bool remember = iterations_ >= levels_ - 1;
  ++iterations_;
  // Jacobi iterations are greedy at every temperature: the guesses only draft.
#ifdef SPECLAB_WITH_CUDA
  if (device.is_cuda()) {
    const at::Tensor rows = logits.to(device, at::kFloat).contiguous();
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device, "lookahead: window", [&](void* stream) {
      return LaunchIterateWindow(Pointers(), window_.data_ptr<int64_t>(), levels_, width_, rows.data_ptr<float>(),
                                 standins, eos_, remember, stream);
    }));
    return absl::OkStatus();
  }
#endif
  if (!device.is_cpu()) return absl::UnimplementedError(absl::StrCat("lookahead: no device form on ", device.str()));
  const at::Tensor guesses = logits.narrow(0, r - width_, width_).argmax(-1).to(device, at::kLong).contiguous();
  AdvanceWindow(Pointers(), window_.data_ptr<int64_t>(), levels_, width_, guesses.data_ptr<int64_t>(), standins, eos_,
                remember);
  return absl::OkStatus();
}

std::vector<int32_t> DeviceLookahead::Window() const {
  const at::Tensor host = window_.cpu();
  return std::vector<int32_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}

std::vector<std::vector<int32_t>> DeviceLookahead::Followers(int32_t key) const {
  const at::Tensor stamps = stamps_.select(0, key).cpu(), followers = followers_.select(0, key).cpu();
  const int64_t* s = stamps.data_ptr<int64_t>();
  std::vector<int> order(stamps.size(0));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return s[a] > s[b]; });
  std::vector<std::vector<int32_t>> out;
  for (int j : order) {
    if (s[j] == 0) break;
    const int64_t* f = followers.data_ptr<int64_t>() + j * levels_;
    out.emplace_back(f, f + levels_);
  }
  return out;
}

}  // namespace speclab::lookahead
