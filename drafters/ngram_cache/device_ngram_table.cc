#include "drafters/ngram_cache/device_ngram_table.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "drafters/ngram_cache/ngram_cache_drafter.h"
#include "framework/core/status_macros.h"
#include "framework/device/kernel_launch.h"

#ifdef SPECLAB_WITH_CUDA
#include "drafters/ngram_cache/cuda/ngram_cache_kernel.h"
#endif

namespace speclab::ngram_cache {

DeviceNgramTable::DeviceNgramTable(NgramTableShape shape, c10::Device device) : shape_(shape) {
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  keys_ = at::zeros({shape.rows, shape.leader_length}, longs);
  row_stamps_ = at::zeros({shape.rows}, longs);
  followers_ = at::zeros({shape.rows, shape.columns, shape.follower_length}, longs);
  follower_stamps_ = at::zeros({shape.rows, shape.columns}, longs);
  clock_ = at::zeros({1}, longs);
  learned_ = at::zeros({1}, longs);
}

void DeviceNgramTable::Load(const LruNgramTable& table, int64_t learned) {
  const auto cpu = at::TensorOptions().dtype(at::kLong);
  at::Tensor keys = at::zeros(keys_.sizes(), cpu), row_stamps = at::zeros(row_stamps_.sizes(), cpu);
  at::Tensor followers = at::zeros(followers_.sizes(), cpu), follower_stamps = at::zeros(follower_stamps_.sizes(), cpu);
  const std::vector<LruNgramTable::Row> rows = table.Rows();
  const int64_t n = static_cast<int64_t>(rows.size());
  int64_t* ks = keys.data_ptr<int64_t>();
  int64_t* rs = row_stamps.data_ptr<int64_t>();
  int64_t* fl = followers.data_ptr<int64_t>();
  int64_t* fs = follower_stamps.data_ptr<int64_t>();
  for (int64_t r = 0; r < n; ++r) {
    const auto& [key, row_followers] = rows[r];
    rs[r] = n - r;  // the most recent first: the largest stamp
    std::copy(key.begin(), key.end(), ks + r * shape_.leader_length);
    const int64_t m = static_cast<int64_t>(row_followers.size());
    for (int64_t c = 0; c < m; ++c) {
      fs[r * shape_.columns + c] = m - c;
      std::copy(row_followers[c].begin(), row_followers[c].end(),
                fl + (r * shape_.columns + c) * shape_.follower_length);
    }
  }
  keys_.copy_(keys);
  row_stamps_.copy_(row_stamps);
  followers_.copy_(followers);
  follower_stamps_.copy_(follower_stamps);
  clock_.fill_(std::max<int64_t>(n, shape_.columns));  // past every stamp given
  learned_.fill_(learned);
}

std::vector<LruNgramTable::Row> DeviceNgramTable::Rows() const {
  const at::Tensor keys = keys_.cpu(), row_stamps = row_stamps_.cpu();
  const at::Tensor followers = followers_.cpu(), follower_stamps = follower_stamps_.cpu();
  const int64_t* rs = row_stamps.data_ptr<int64_t>();
  const int64_t* fs = follower_stamps.data_ptr<int64_t>();
  const int64_t* ks = keys.data_ptr<int64_t>();
  const int64_t* fl = followers.data_ptr<int64_t>();
  std::vector<int> order(shape_.rows);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return rs[a] > rs[b]; });
  std::vector<LruNgramTable::Row> rows;
  for (int r : order) {
    if (rs[r] == 0) break;
    LruNgramTable::Row row;
    const int64_t* key = ks + int64_t{r} * shape_.leader_length;
    row.first.assign(key, key + shape_.leader_length);
    std::vector<int> columns(shape_.columns);
    std::iota(columns.begin(), columns.end(), 0);
    const int64_t* stamps = fs + static_cast<int64_t>(r) * shape_.columns;
    std::sort(columns.begin(), columns.end(), [&](int a, int b) { return stamps[a] > stamps[b]; });
    for (int c : columns) {
      if (stamps[c] == 0) break;
      const int64_t* follower = fl + (int64_t{r} * shape_.columns + c) * shape_.follower_length;
      row.second.emplace_back(follower, follower + shape_.follower_length);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

int64_t DeviceNgramTable::learned() const { return learned_.item<int64_t>(); }

#ifdef SPECLAB_WITH_CUDA
TablePointers DeviceNgramTable::Pointers() {
  return {.keys = keys_.data_ptr<int64_t>(), .row_stamps = row_stamps_.data_ptr<int64_t>(),
          .followers = followers_.data_ptr<int64_t>(), .follower_stamps = follower_stamps_.data_ptr<int64_t>(),
          .clock = clock_.data_ptr<int64_t>(), .learned = learned_.data_ptr<int64_t>(),
          .leader = shape_.leader_length, .follower = shape_.follower_length, .rows = shape_.rows,
          .columns = shape_.columns};
}
#endif

absl::StatusOr<at::Tensor> DeviceNgramTable::LearnAndDraft(const at::Tensor& context, const at::Tensor& last_two,
                                                           const at::Tensor& start, int length, bool recursive) {
  if (length < 0) return absl::InvalidArgumentError(absl::StrCat("ngram_cache: draft length ", length));
  const c10::Device device = keys_.device();
  const at::Tensor ctx = context.to(device, at::kLong).contiguous();
  const at::Tensor two = last_two.to(device, at::kLong).contiguous();
  const at::Tensor at_start = start.to(device, at::kLong).contiguous();
  at::Tensor out = at::empty({length + 1}, keys_.options());
#ifdef SPECLAB_WITH_CUDA
  if (device.is_cuda()) {
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device, "ngram_cache: table kernel", [&](void* stream) {
      return LaunchLearnAndDraft(Pointers(), ctx.data_ptr<int64_t>(), two.data_ptr<int64_t>(),
                                 at_start.data_ptr<int64_t>(), length, recursive, out.data_ptr<int64_t>(), stream);
    }));
    return out;
  }
#endif
  if (!device.is_cpu())
    return absl::UnimplementedError(absl::StrCat("ngram_cache: no device-rooted continuations on ", device.str()));
  LearnAndDraftOnCpu(ctx, two, at_start.item<int64_t>(), length, recursive, out);
  return out;
}

absl::StatusOr<DeviceContinuations> DeviceNgramTable::LearnAndBranch(const at::Tensor& context,
                                                                     const at::Tensor& last_two,
                                                                     const at::Tensor& start, int max_tokens,
                                                                     int max_candidates, bool recursive) {
  if (max_tokens < 1 || max_candidates < 1)
    return absl::InvalidArgumentError(absl::StrCat("ngram_cache: ", max_candidates, " candidates of ", max_tokens,
                                                   " tokens"));
  const c10::Device device = keys_.device();
  const at::Tensor ctx = context.to(device, at::kLong).contiguous();
  const at::Tensor two = last_two.to(device, at::kLong).contiguous();
  const at::Tensor at_start = start.to(device, at::kLong).contiguous();
#ifdef SPECLAB_WITH_CUDA
  if (device.is_cuda()) {
    if (max_candidates > kMaxCandidates)
      return absl::UnimplementedError(absl::StrCat("ngram_cache: the device trie keeps at most ", kMaxCandidates,
                                                   " candidates, the builder asks ", max_candidates));
    DeviceContinuations out{.tokens = at::empty({max_candidates, max_tokens}, keys_.options()),
                            .lengths = at::empty({max_candidates}, keys_.options())};
    RETURN_IF_ERROR(kernel_launch::LaunchOn(device, "ngram_cache: trie kernel", [&](void* stream) {
      return LaunchLearnAndBranch(Pointers(), ctx.data_ptr<int64_t>(), two.data_ptr<int64_t>(),
                                  at_start.data_ptr<int64_t>(), max_tokens, max_candidates, recursive,
                                  out.tokens.data_ptr<int64_t>(), out.lengths.data_ptr<int64_t>(), stream);
    }));
    return out;
  }
#endif
  if (!device.is_cpu())
    return absl::UnimplementedError(absl::StrCat("ngram_cache: no device-rooted candidates on ", device.str()));
  LearnOnCpu(ctx, two, at_start.item<int64_t>());
  const std::vector<int32_t> sequence = HostSequence(ctx, two, at_start);
  return ToDeviceContinuations(
      CachedContinuations(LruNgramTable::FromRows(shape_, Rows()), sequence, max_tokens, max_candidates, recursive),
      max_candidates, max_tokens, sequence.back(), device);
}

// The kernel's rule, one row at a time (cuda/ngram_cache_kernel.cu).
int DeviceNgramTable::ScanOnCpu(const int64_t* key, int* oldest) const {
  const int64_t* keys = keys_.data_ptr<int64_t>();
  const int64_t* row_stamps = row_stamps_.data_ptr<int64_t>();
  int found = -1;
  *oldest = 0;
  for (int r = 0; r < shape_.rows; ++r) {
    if (row_stamps[r] < row_stamps[*oldest]) *oldest = r;
    if (row_stamps[r] == 0 || found >= 0) continue;
    if (std::equal(key, key + shape_.leader_length, keys + int64_t{r} * shape_.leader_length)) found = r;
  }
  return found;
}

void DeviceNgramTable::LearnOnCpu(const at::Tensor& context, const at::Tensor& last_two, int64_t s) {
  const int leader = shape_.leader_length, follower = shape_.follower_length, columns = shape_.columns;
  int64_t* keys = keys_.data_ptr<int64_t>();
  int64_t* row_stamps = row_stamps_.data_ptr<int64_t>();
  int64_t* followers = followers_.data_ptr<int64_t>();
  int64_t* follower_stamps = follower_stamps_.data_ptr<int64_t>();
  int64_t& clock = *clock_.data_ptr<int64_t>();
  int64_t& learned = *learned_.data_ptr<int64_t>();
  const int64_t* ctx = context.data_ptr<int64_t>();
  const int64_t* two = last_two.data_ptr<int64_t>();
  const int64_t n = s + 2;
  std::vector<int64_t> window(leader + follower);
  for (int64_t end = std::max<int64_t>(learned, leader + follower - 1); end < n; ++end) {
    for (int i = 0; i < leader + follower; ++i) {
      const int64_t p = end - (leader + follower - 1) + i;
      window[i] = p < s ? ctx[p] : two[p - s];
    }
    int oldest = 0;
    const int found = ScanOnCpu(window.data(), &oldest);
    const int row = found >= 0 ? found : oldest;
    const int64_t stamp = ++clock;
    int64_t* row_followers = followers + int64_t{row} * columns * follower;
    int64_t* stamps = follower_stamps + int64_t{row} * columns;
    if (found < 0) {
      std::copy(window.begin(), window.begin() + leader, keys + int64_t{row} * leader);
      std::fill(stamps, stamps + columns, 0);
    }
    row_stamps[row] = stamp;
    int same = -1, oldest_column = 0;
    for (int c = 0; c < columns; ++c) {
      if (stamps[c] > 0 && same < 0 && std::equal(window.begin() + leader, window.end(), row_followers + c * follower))
        same = c;
      if (stamps[c] < stamps[oldest_column]) oldest_column = c;
    }
    const int c = same >= 0 ? same : oldest_column;
    if (same < 0) std::copy(window.begin() + leader, window.end(), row_followers + c * follower);
    stamps[c] = stamp;
  }
  learned = n;
}

void DeviceNgramTable::LearnAndDraftOnCpu(const at::Tensor& context, const at::Tensor& last_two, int64_t s,
                                          int length, bool recursive, at::Tensor& out) {
  LearnOnCpu(context, last_two, s);
  const int leader = shape_.leader_length, follower = shape_.follower_length, columns = shape_.columns;
  const int64_t* followers = followers_.data_ptr<int64_t>();
  const int64_t* follower_stamps = follower_stamps_.data_ptr<int64_t>();
  const int64_t* ctx = context.data_ptr<int64_t>();
  const int64_t* two = last_two.data_ptr<int64_t>();
  int64_t* drafts = out.data_ptr<int64_t>() + 1;
  const int64_t n = s + 2;
  auto seq = [&](int64_t p) { return p < s ? ctx[p] : p < n ? two[p - s] : drafts[p - n]; };
  out.data_ptr<int64_t>()[0] = seq(n - 1);
  std::vector<int64_t> key(leader);
  int drafted = 0;
  while (drafted < length && n + drafted >= leader) {
    for (int i = 0; i < leader; ++i) key[i] = seq(n + drafted - leader + i);
    int oldest = 0;
    const int found = ScanOnCpu(key.data(), &oldest);
    if (found < 0) break;
    const int64_t* stamps = follower_stamps + int64_t{found} * columns;
    const int newest = static_cast<int>(std::max_element(stamps, stamps + columns) - stamps);
    const int64_t* tokens = followers + (int64_t{found} * columns + newest) * follower;
    for (int i = 0; i < follower && drafted < length; ++i) drafts[drafted++] = tokens[i];
    if (!recursive) break;
  }
  for (int j = drafted; j < length; ++j) drafts[j] = j > 0 ? drafts[j - 1] : seq(n - 1);
}

}  // namespace speclab::ngram_cache
