#include "tests/support/device_roots.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "drafters/common/fixed_length.h"
#include "framework/core/options.h"
#include "framework/core/token_tree.h"
#include "framework/device_transfer.h"
#include "framework/drafter.h"

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

namespace {

std::unique_ptr<Drafter> DrafterOn(c10::Device device, const std::string& yaml) {
  Options spec = *Options::FromString(yaml, "drafter.yaml");
  auto drafter = DrafterRegistry::Create(spec, "drafter", DrafterEnvironment{.device = device});
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  return drafter.ok() ? *std::move(drafter) : nullptr;
}

}  // namespace

int ExpectPipelinedDraftsOfTheHost(c10::Device device, const std::string& drafter_yaml,
                                   const std::vector<std::vector<int32_t>>& prompts, int steps, int max_tokens,
                                   int max_candidates, int vocab) {
  using Tokens = std::vector<int32_t>;
  std::unique_ptr<Drafter> pipelined = DrafterOn(device, drafter_yaml);
  std::unique_ptr<Drafter> host = DrafterOn(c10::Device(c10::kCPU), drafter_yaml);
  if (pipelined == nullptr || host == nullptr) return 0;
  DeviceDrafter* form = DeviceFormOf(*pipelined);
  EXPECT_NE(form, nullptr);
  int compared = 0;
  Tokens output;
  for (size_t p = 0; p < prompts.size(); ++p) {
    Tokens sequence = prompts[p];
    if (!output.empty()) sequence.insert(sequence.end(), output.begin() + output.size() / 3, output.end());
    const size_t prompt_size = sequence.size();
    EXPECT_TRUE(pipelined->Reset(sequence, {}).ok());
    EXPECT_TRUE(host->Reset(sequence, {}).ok());
    for (int step = 0; step < steps; ++step) {
      const std::string where = absl::StrCat(device.str(), " ", drafter_yaml, ", prompt ", p, ", step ", step, ", ",
                                             max_candidates, " of ", max_tokens);
      const DeviceRoot root = RootOfSequence(sequence, device, /*stale=*/3, /*stale_token=*/vocab - 1);
      EXPECT_TRUE(host->BeginStep(sequence).ok());
      const TokenTree tree(sequence.back());
      Tokens next;  // the drafts accepted
      if (step % 3 == 2) {
        auto path = host->Continuation(tree, 0, max_tokens);
        auto chain = form->ContinuationAt(root, max_tokens);
        EXPECT_TRUE(path.ok() && chain.ok()) << where << ": " << chain.status();
        if (!path.ok() || !chain.ok()) return compared;
        const Tokens expected = ToFixedLength(*path, max_tokens, sequence.back());
        const at::Tensor got = chain->cpu();
        EXPECT_EQ(got.data_ptr<int64_t>()[0], sequence.back()) << where;
        for (int k = 0; k < max_tokens; ++k) EXPECT_EQ(got.data_ptr<int64_t>()[1 + k], expected[k]) << where;
        compared += static_cast<int>(path->size());
        next = *path;
      } else {
        auto expected = host->Continuations(tree, 0, max_tokens, max_candidates);
        auto got = form->ContinuationsAt(root, max_tokens, max_candidates);
        EXPECT_TRUE(expected.ok() && got.ok()) << where << ": " << got.status();
        if (!expected.ok() || !got.ok()) return compared;
        ExpectContinuations(*got, *expected, sequence.back(), where);
        compared += static_cast<int>(expected->size());
        if (!expected->empty()) next = expected->back();  // the last drafted branch, say
      }
      for (int j = 0; j < (step * 5 + p) % 4 && j < static_cast<int>(next.size()); ++j) sequence.push_back(next[j]);
      sequence.push_back(static_cast<int32_t>((sequence.back() * 7 + step) % vocab));
    }
    output.assign(sequence.begin() + prompt_size, sequence.end());
  }
  return compared;
}

}  // namespace speclab::testing
