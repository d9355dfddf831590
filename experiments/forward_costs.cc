#include "experiments/forward_costs.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_timer.h"
#include "framework/device_transfer.h"
#include "framework/error_text.h"

namespace speclab {
namespace {


void Synchronize(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::vector<uint8_t> CausalMask(int64_t n) {
  std::vector<uint8_t> mask(static_cast<size_t>(n * n), 0);
  for (int64_t i = 0; i < n; ++i) std::fill_n(&mask[static_cast<size_t>(i * n)], i + 1, 1);
  return mask;
}

// Token ids that every vocabulary of more than 3 tokens has, off the usual specials.
std::vector<int64_t> Tokens(int64_t n, int64_t offset, int64_t vocab) {
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = 3 + (offset + 7 * i) % (vocab - 3);
  return out;
}

std::vector<int64_t> Range(int64_t from, int64_t n) {
  std::vector<int64_t> out(n);
  for (int64_t i = 0; i < n; ++i) out[i] = from + i;
  return out;
}

absl::StatusOr<std::map<int64_t, double>> Measure(LanguageModel& model, const std::set<int64_t>& token_counts,
                                                  int64_t context, int repeats, bool synchronize_each) {
  c10::InferenceMode inference;
  const c10::Device device = model.device();
  const int64_t vocab = model.config().vocab_size;
  const int64_t largest = token_counts.empty() ? 0 : *token_counts.rbegin();
  context = std::max<int64_t>(1, std::min(context, model.capacity() - largest));
  if (largest <= 0 || context + largest > model.capacity())
    return absl::InvalidArgumentError(absl::StrCat("forward costs: token counts up to ", largest,
                                                   " do not fit the KV capacity ", model.capacity()));
  RETURN_IF_ERROR(model.Truncate(0));
  RETURN_IF_ERROR(model.Forward(LongsToDevice(Tokens(context, 0, vocab), device),
                                LongsToDevice(Range(0, context), device),
                                MaskToDevice(CausalMask(context), context, context, device))
                      .status());
  RETURN_IF_ERROR(model.Commit(Range(0, context)));
  std::map<int64_t, double> costs;
  for (int64_t n : token_counts) {
    const at::Tensor tokens = LongsToDevice(Tokens(n, context, vocab), device);
    const at::Tensor positions = LongsToDevice(Range(context, n), device);
    const at::Tensor mask = MaskToDevice(CausalMask(n), n, n, device);
    auto run = [&](int times) -> absl::Status {
      for (int i = 0; i < times; ++i) {
        RETURN_IF_ERROR(model.Forward(tokens, positions, mask).status());
        RETURN_IF_ERROR(model.Truncate(context));
        if (synchronize_each) Synchronize(device);
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(run(3));  // graph capture, allocator, kernel selection
    Synchronize(device);
    if (synchronize_each) {  // the host's clock, waits included
      const auto start = std::chrono::steady_clock::now();
      RETURN_IF_ERROR(run(repeats));
      costs[n] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repeats;
      continue;
    }
    // The device's own time (device_timer.h).
    ASSIGN_OR_RETURN(double seconds, MedianDeviceSeconds(device, [&] { return run(repeats); }));
    costs[n] = seconds / repeats;
  }
  RETURN_IF_ERROR(model.Truncate(0));
  return costs;
}

}  // namespace

absl::StatusOr<std::map<int64_t, double>> MeasureForwardCosts(LanguageModel& model,
                                                              const std::set<int64_t>& token_counts,
                                                              int64_t context, int repeats, bool synchronize_each) {
  try {
    return Measure(model, token_counts, context, std::max(repeats, 1), synchronize_each);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("measuring forward costs: ", ErrorText(e)));
  }
}

absl::StatusOr<double> PredictSeconds(const std::map<int64_t, int64_t>& counts,
                                      const std::map<int64_t, double>& costs) {
  double seconds = 0;
  for (const auto& [tokens, count] : counts) {
    auto it = costs.find(tokens);
    if (it == costs.end())
      return absl::InternalError(absl::StrCat("no measured cost for a forward of ", tokens, " tokens"));
    seconds += count * it->second;
  }
  return seconds;
}

absl::StatusOr<double> GraphRunSeconds(DeviceGraphs& graphs, const std::map<std::string, int64_t>& runs,
                                       int repeats, std::map<std::string, double>& prices) {
  double seconds = 0;
  for (const auto& [work, count] : runs) {
    auto price = prices.find(work);
    if (price == prices.end()) {
      ASSIGN_OR_RETURN(const double one, graphs.SecondsPerRun(work, repeats));
      price = prices.emplace(work, one).first;
    }
    seconds += static_cast<double>(count) * price->second;
  }
  return seconds;
}

}  // namespace speclab
