#include "drafters/retrieval/device_rest_lookup.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "drafters/common/device_chain.h"
#include "drafters/retrieval/cuda/rest_kernel.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_drafter.h"
#include "framework/device/kernel_launch.h"

namespace speclab::retrieval {

std::vector<int32_t> RunWalkPath(const Datastore& store, absl::Span<const int32_t> sequence,
                                 const RestOptions& options, int length) {
  std::vector<int32_t> path;
  const int cap = std::min(length, options.continuation_tokens);
  if (cap < 1) return path;
  const int64_t size = static_cast<int64_t>(store.tokens.size());
  const SuffixMatch match = LongestMatch(store, sequence, options);
  const int matched = match.suffix_length;
  int64_t lo = match.first, hi = match.last;
  if (matched == 0) return path;
  for (int depth = 0; depth < cap; ++depth) {
    auto next = [&](int64_t j) {
      const int64_t at = store.suffixes[j] + matched + depth;
      return at < size ? store.tokens[at] : -1;  // -1: the datastore ended
    };
    int64_t best = -1, best_length = 0;  // the longest run of one next token, the first on ties
    for (int64_t j = lo; j < hi;) {
      int64_t end = j + 1;
      while (end < hi && next(end) == next(j)) ++end;
      if (next(j) >= 0 && end - j > best_length) {
        best = j;
        best_length = end - j;
      }
      j = end;
    }
    if (best < 0) break;
    path.push_back(next(best));
    lo = best;
    hi = best + best_length;
  }
  return path;
}

absl::Status DeviceRestLookup::Takes(const RestOptions& options) {
  if (options.max_suffix > kKernelMaxSuffix)
    return absl::UnimplementedError(absl::StrCat("retrieval: the device lookup searches suffixes of at most ",
                                                 kKernelMaxSuffix, " tokens; max_suffix is ", options.max_suffix));
  if (options.max_matches > kKernelMaxMatches)
    return absl::UnimplementedError(absl::StrCat("retrieval: the device lookup reads at most ", kKernelMaxMatches,
                                                 " matches; max_matches is ", options.max_matches));
  return absl::OkStatus();
}

DeviceRestLookup::DeviceRestLookup(std::shared_ptr<const Datastore> store, RestOptions options, c10::Device device)
    : store_(std::move(store)), options_(options), device_(device) {
  if (device.is_cpu()) return;  // the walk reads the host's store
  const int64_t n = static_cast<int64_t>(store_->tokens.size());
  // from_blob never writes: the const_casts only fit its signature.
  tokens_ = at::from_blob(const_cast<int32_t*>(store_->tokens.data()), {n}, at::TensorOptions().dtype(at::kInt))
                .to(device);
  suffixes_ = at::from_blob(const_cast<int64_t*>(store_->suffixes.data()), {n}, at::TensorOptions().dtype(at::kLong))
                  .to(device);
}

absl::StatusOr<at::Tensor> DeviceRestLookup::Draft(const at::Tensor& context, const at::Tensor& last_two,
                                                   const at::Tensor& start, int length) const {
  if (length < 0) return absl::InvalidArgumentError(absl::StrCat("retrieval: draft length ", length));
  const at::Tensor ctx = context.to(device_, at::kLong).contiguous();
  const at::Tensor two = last_two.to(device_, at::kLong).contiguous();
  const at::Tensor at_start = start.to(device_, at::kLong).contiguous();
#ifdef SPECLAB_WITH_CUDA
  if (device_.is_cuda()) {
    at::Tensor out = at::empty({length + 1}, ctx.options());
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device_, "retrieval: lookup kernel", [&](void* stream) {
      return LaunchRestContinuation(Store(), Shape(), ctx.data_ptr<int64_t>(), two.data_ptr<int64_t>(),
                                    at_start.data_ptr<int64_t>(), length, out.data_ptr<int64_t>(), stream);
    }));
    return out;
  }
#endif
  if (!device_.is_cpu())
    return absl::UnimplementedError(absl::StrCat("retrieval: no device-rooted continuations on ", device_.str()));
  // The kernel's walk on the host (the CPU runs tests).
  const std::vector<int32_t> sequence = HostSequence(ctx, two, at_start);
  return ToDeviceChain(sequence.back(), RunWalkPath(*store_, sequence, options_, length), length, device_);
}

absl::StatusOr<DeviceContinuations> DeviceRestLookup::Candidates(const at::Tensor& context, const at::Tensor& last_two,
                                                                const at::Tensor& start, int max_tokens,
                                                                int max_candidates) const {
  if (max_tokens < 1 || max_candidates < 1)
    return absl::InvalidArgumentError(absl::StrCat("retrieval: ", max_candidates, " candidates of ", max_tokens,
                                                   " tokens"));
  const at::Tensor ctx = context.to(device_, at::kLong).contiguous();
  const at::Tensor two = last_two.to(device_, at::kLong).contiguous();
  const at::Tensor at_start = start.to(device_, at::kLong).contiguous();
#ifdef SPECLAB_WITH_CUDA
  if (device_.is_cuda()) {
    if (max_candidates > kMaxCandidates)
      return absl::UnimplementedError(absl::StrCat("retrieval: the device lookup keeps at most ", kMaxCandidates,
                                                   " candidates, the builder asks ", max_candidates));
    DeviceContinuations out{.tokens = at::empty({max_candidates, max_tokens}, ctx.options()),
                            .lengths = at::empty({max_candidates}, ctx.options())};
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device_, "retrieval: lookup kernel", [&](void* stream) {
      return LaunchRestCandidates(Store(), Shape(), ctx.data_ptr<int64_t>(), two.data_ptr<int64_t>(),
                                  at_start.data_ptr<int64_t>(), max_tokens, max_candidates,
                                  out.tokens.data_ptr<int64_t>(), out.lengths.data_ptr<int64_t>(), stream);
    }));
    return out;
  }
#endif
  if (!device_.is_cpu())
    return absl::UnimplementedError(absl::StrCat("retrieval: no device-rooted candidates on ", device_.str()));
  const std::vector<int32_t> sequence = HostSequence(ctx, two, at_start);
  return ToDeviceContinuations(
      MostFrequentPrefixes(CountContinuations(*store_, sequence, options_, max_tokens), max_candidates),
      max_candidates, max_tokens, sequence.back(), device_);
}

#ifdef SPECLAB_WITH_CUDA
StorePointers DeviceRestLookup::Store() const {
  return {.tokens = tokens_.data_ptr<int32_t>(), .suffixes = suffixes_.data_ptr<int64_t>(), .size = tokens_.size(0)};
}

LookupShape DeviceRestLookup::Shape() const {
  return {.max_suffix = options_.max_suffix, .min_suffix = options_.min_suffix, .max_matches = options_.max_matches,
          .continuation_tokens = options_.continuation_tokens};
}
#endif

}  // namespace speclab::retrieval
