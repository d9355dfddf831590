#include "experiments/decode_bench.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "framework/core/file_util.h"

namespace speclab {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kRoot = SPECLAB_SOURCE_DIR;

TEST(DecodeBenchFlagsTest, DefaultsAndValues) {
  auto flags = ParseDecodeBenchFlags({"--out", "o", "--shapes=8b,shipped,8b", "--new-tokens", "16", "--prompt-tokens=8",
                                      "--device", "cpu", "--no-graphs", "--eager-too"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->out_dir, "o");
  EXPECT_THAT(flags->shapes, ElementsAre("8b", "shipped"));  // duplicates measured once
  EXPECT_EQ(flags->new_tokens, 16);
  EXPECT_EQ(flags->prompt_tokens, 8);
  EXPECT_EQ(flags->device, "cpu");
  EXPECT_TRUE(flags->no_graphs);
  EXPECT_TRUE(flags->eager_too);
  EXPECT_THAT(flags->command_line, HasSubstr("speclab bench-decode --out o --shapes=8b,shipped,8b"));

  auto defaults = ParseDecodeBenchFlags({});
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_TRUE(defaults->shapes.empty());
  EXPECT_EQ(defaults->new_tokens, 0);  // chosen per device
  EXPECT_EQ(defaults->prompt_tokens, 32);
  EXPECT_EQ(defaults->device, "auto");
}

TEST(DecodeBenchFlagsTest, ErrorsNameTheValidChoices) {
  auto unknown_flag = ParseDecodeBenchFlags({"--tokens", "5"});
  EXPECT_THAT(unknown_flag.status().message(), HasSubstr("unknown flag '--tokens'"));
  EXPECT_THAT(unknown_flag.status().message(), HasSubstr("--new-tokens"));

  auto unknown_shape = ParseDecodeBenchFlags({"--shapes", "shipped,70b"});
  EXPECT_THAT(unknown_shape.status().message(), HasSubstr("unknown shape '70b' (valid: shipped, 1b, 8b)"));

  EXPECT_THAT(ParseDecodeBenchFlags({"--new-tokens", "0"}).status().message(), HasSubstr("--new-tokens"));
  EXPECT_THAT(ParseDecodeBenchFlags({"--prompt-tokens", "x"}).status().message(), HasSubstr("--prompt-tokens"));
  EXPECT_THAT(ParseDecodeBenchFlags({"--out"}).status().message(), HasSubstr("--out needs a value"));
  EXPECT_THAT(ParseDecodeBenchFlags({"--no-graphs=1"}).status().message(), HasSubstr("takes no value"));
  EXPECT_THAT(ParseDecodeBenchFlags({"shipped"}).status().message(), HasSubstr("unexpected argument 'shipped'"));
  EXPECT_THAT(ParseDecodeBenchFlags({"--shapes", ","}).status().message(), HasSubstr("empty list"));
}

// Parameter counts are computed from the configs (nothing is allocated) and
// match the published sizes: Llama-3.2-1B has 1,235,814,400 parameters
// (tied embeddings), Llama-3.1-8B 8,030,261,248.
TEST(DecodeBenchShapesTest, ConfigsHaveThePublishedParameterCounts) {
  auto one_b = LoadDecodeBenchShape("1b", kRoot);
  ASSERT_TRUE(one_b.ok()) << one_b.status();
  EXPECT_EQ(one_b->ParameterCount(), 1235814400);
  EXPECT_TRUE(one_b->tie_word_embeddings);
  EXPECT_EQ(one_b->rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(one_b->rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(one_b->rope_theta, 500000.0);

  auto eight_b = LoadDecodeBenchShape("8b", kRoot);
  ASSERT_TRUE(eight_b.ok()) << eight_b.status();
  EXPECT_EQ(eight_b->ParameterCount(), 8030261248);
  EXPECT_FALSE(eight_b->tie_word_embeddings);
  EXPECT_EQ(eight_b->head_dim, 128);
  EXPECT_DOUBLE_EQ(eight_b->rope_scaling.factor, 8.0);

  EXPECT_THAT(LoadDecodeBenchShape("70b", kRoot).status().message(), HasSubstr("valid: shipped, 1b, 8b"));
}

TEST(DecodeBenchShapesTest, KvBytesPerStep) {
  auto eight_b = LoadDecodeBenchShape("8b", kRoot);
  ASSERT_TRUE(eight_b.ok()) << eight_b.status();
  // 2 (K, V) * 32 layers * 8 heads * 128 dims * 2 bytes = 128 KiB per cached token.
  EXPECT_EQ(KvBytesPerStep(*eight_b, 1, 2), 131072);
  EXPECT_EQ(KvBytesPerStep(*eight_b, 96, 2), 96 * 131072);
}

// The whole CPU path on the shipped model, as small as it gets.
TEST(DecodeBenchRunTest, ShippedOnCpuWritesTheReports) {
  if (!std::filesystem::exists(kRoot + "/models/speclab-target/config.json")) GTEST_SKIP() << "no shipped model";
  const std::string out =
      (std::filesystem::temp_directory_path() / ("decode_bench_test_" + std::to_string(::getpid()))).string();
  auto flags = ParseDecodeBenchFlags({"--shapes", "shipped", "--device", "cpu", "--new-tokens", "4", "--prompt-tokens",
                                      "4", "--repeats", "1", "--out", out});
  ASSERT_TRUE(flags.ok()) << flags.status();
  flags->root = kRoot;
  ASSERT_TRUE(RunDecodeBench(*flags).ok());
  std::stringstream md, csv;
  md << std::ifstream(out + "/decode_bench.md").rdbuf();
  csv << std::ifstream(out + "/decode_bench.csv").rdbuf();
  EXPECT_THAT(md.str(), HasSubstr("| shipped |"));
  EXPECT_THAT(md.str(), HasSubstr("copy bandwidth"));
  EXPECT_THAT(csv.str(), HasSubstr("\nshipped,"));
  RemoveTree(out);
}

}  // namespace
}  // namespace speclab
