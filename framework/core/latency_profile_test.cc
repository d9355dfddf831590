#include "framework/core/latency_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace speclab {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<LatencyProfile> Read(const std::string& yaml) {
  auto options = Options::FromString(yaml, "plugin.yaml");
  if (!options.ok()) return options.status();
  return ReadLatencyProfile(*options);
}

TEST(LatencyProfileTest, InterpolatesBetweenMeasuredCounts) {
  const LatencyProfile p{.budgets = {1, 2, 4, 8}, .target_ms = {1.0, 1.2, 1.6, 3.2}, .draft_ms = 0.1};
  EXPECT_DOUBLE_EQ(p.TargetMs(1), 1.0);
  EXPECT_DOUBLE_EQ(p.TargetMs(3), 1.4);   // halfway between 2 and 4
  EXPECT_DOUBLE_EQ(p.TargetMs(6), 2.4);   // halfway between 4 and 8
  EXPECT_DOUBLE_EQ(p.TargetMs(12), 4.8);  // the last slope, 0.4 ms a token, past 8
  const LatencyProfile from_four{.budgets = {4, 8}, .target_ms = {2.0, 3.0}};
  EXPECT_DOUBLE_EQ(from_four.TargetMs(1), 2.0);  // below the first count: its time
}

TEST(LatencyProfileTest, FitsTimesThatFallAsNonDecreasingRuns) {
  EXPECT_EQ(NonDecreasingFit({1.0, 1.5, 1.5, 2.0}), (std::vector<double>{1.0, 1.5, 1.5, 2.0}));
  EXPECT_EQ(NonDecreasingFit({3.0, 1.0, 2.0}), (std::vector<double>{2.0, 2.0, 2.0}));
  EXPECT_EQ(NonDecreasingFit({1.0, 4.0, 2.0, 3.0, 5.0}), (std::vector<double>{1.0, 3.0, 3.0, 3.0, 5.0}));
  EXPECT_EQ(NonDecreasingFit({}), std::vector<double>{});
  // Read, a measured dip (8.25 ms for 8 tokens after 8.31 for 7) pools with
  // the time before it, so that no longer draft looks cheaper than a shorter one.
  auto read = Read("{latency_profile: {budgets: [6, 7, 8, 9], target_ms: [8.18, 8.31, 8.25, 9.30], draft_ms: 0.7}}");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->target_ms.size(), 4u);
  EXPECT_DOUBLE_EQ(read->target_ms[0], 8.18);
  EXPECT_DOUBLE_EQ(read->target_ms[1], (8.31 + 8.25) / 2);
  EXPECT_DOUBLE_EQ(read->target_ms[2], (8.31 + 8.25) / 2);
  EXPECT_DOUBLE_EQ(read->target_ms[3], 9.30);
}

TEST(LatencyProfileTest, ReadsInlineOrFromAFileAndNamesWhatIsWrong) {
  auto inline_profile = Read("{latency_profile: {budgets: [1, 4], target_ms: [1.0, 2.0], draft_ms: 0.2}}");
  ASSERT_TRUE(inline_profile.ok()) << inline_profile.status();
  EXPECT_EQ(inline_profile->budgets, (std::vector<int>{1, 4}));
  EXPECT_DOUBLE_EQ(inline_profile->draft_ms, 0.2);

  const std::string dir = ::testing::TempDir();
  const std::string file = (std::filesystem::path(dir) / "profile.yaml").string();
  std::ofstream(file) << "acceptance: [0.5]\nlatency_profile: {budgets: [1, 2], target_ms: [1.0, 1.1], draft_ms: 0.1}\n";
  auto from_file = Read("{latency_profile_file: " + file + "}");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->budgets, (std::vector<int>{1, 2}));

  EXPECT_THAT(std::string(Read("{}").status().message()), HasSubstr("latency_profile"));
  EXPECT_THAT(std::string(Read("{latency_profile: {budgets: [1, 2], target_ms: [1.0], draft_ms: 0}}")
                              .status()
                              .message()),
              HasSubstr("target_ms"));
  EXPECT_THAT(std::string(Read("{latency_profile: {budgets: [2, 1], target_ms: [1, 2], draft_ms: 0}}")
                              .status()
                              .message()),
              HasSubstr("budgets"));
  EXPECT_THAT(std::string(Read("{latency_profile: {budgets: [1], target_ms: [1], draft_ms: 0, extra: 1}}")
                              .status()
                              .message()),
              HasSubstr("extra"));
  std::ofstream(file) << "acceptance: [0.5]\n";
  EXPECT_THAT(std::string(Read("{latency_profile_file: " + file + "}").status().message()),
              HasSubstr("has no 'latency_profile' key"));
  EXPECT_THAT(std::string(Read("{latency_profile_file: /nonexistent/p.yaml}").status().message()),
              HasSubstr("latency_profile_file"));
}

}  // namespace
}  // namespace speclab
