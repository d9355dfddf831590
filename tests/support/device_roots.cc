#include "tests/support/device_roots.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "framework/device_transfer.h"

namespace speclab::testing {

DeviceRoot RootOfSequence(const std::vector<int32_t>& sequence, c10::Device device, int stale, int64_t stale_token) {
  const int64_t n = static_cast<int64_t>(sequence.size());
  std::vector<int64_t> context(sequence.begin(), sequence.end() - (stale > 0 ? 2 : 0));
  context.resize(context.size() + stale, stale_token);
  return DeviceRoot{.last_two = LongsToDevice({sequence[n - 2], sequence[n - 1]}, device),
                    .position = {.start = LongsToDevice({n - 2}, device), .max_start = n - 2},
                    .context = LongsToDevice(context, device)};
}

void ExpectContinuations(const DeviceContinuations& got, const std::vector<std::vector<int32_t>>& expected,
                         int64_t root, const std::string& where) {
  const at::Tensor tokens = got.tokens.cpu().contiguous(), lengths = got.lengths.cpu().contiguous();
  const int64_t candidates = tokens.size(0), width = tokens.size(1);
  ASSERT_EQ(lengths.numel(), candidates) << where;
  EXPECT_LE(static_cast<int64_t>(expected.size()), candidates) << where;
  for (int64_t c = 0; c < candidates; ++c) {
    const std::vector<int32_t> want = c < static_cast<int64_t>(expected.size()) ? expected[c] : std::vector<int32_t>{};
    EXPECT_EQ(lengths.data_ptr<int64_t>()[c], static_cast<int64_t>(want.size())) << where << ", candidate " << c;
    for (int64_t t = 0; t < width; ++t)
      EXPECT_EQ(tokens.data_ptr<int64_t>()[c * width + t], t < static_cast<int64_t>(want.size()) ? want[t] : root)
          << where << ", candidate " << c << ", token " << t;
  }
}

}  // namespace speclab::testing
