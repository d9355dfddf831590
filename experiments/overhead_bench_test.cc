#include "experiments/overhead_bench.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "framework/core/file_util.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;

const std::string kRoot = SPECLAB_SOURCE_DIR;

TEST(OverheadBenchFlagsTest, ValuesAndErrors) {
  auto flags = ParseOverheadBenchFlags(
      {"--gamma", "3", "--new-tokens=8", "--device", "cpu", "--out", "o", "--trace", "t", "--verifier", "block",
       "--tree-builder", "{type: dynamic_topk}", "--length-policy", "{type: confidence, threshold: 0}"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->gamma, 3);
  EXPECT_EQ(flags->new_tokens, 8);
  EXPECT_EQ(flags->device, "cpu");
  EXPECT_EQ(flags->out_dir, "o");
  EXPECT_EQ(flags->trace_dir, "t");
  EXPECT_EQ(flags->verifier, "block");
  EXPECT_EQ(flags->tree_builder, "{type: dynamic_topk}");
  EXPECT_EQ(flags->length_policy, "{type: confidence, threshold: 0}");
  EXPECT_THAT(std::string(ParseOverheadBenchFlags({"--gama", "3"}).status().message()),
              HasSubstr("unknown flag '--gama' (valid: --target-shape CONFIG.json"));
  EXPECT_THAT(std::string(ParseOverheadBenchFlags({"--gamma", "x"}).status().message()),
              HasSubstr("--gamma: expected an integer in [1, 32], got 'x'"));
  EXPECT_THAT(std::string(ParseOverheadBenchFlags({"--prompts"}).status().message()), HasSubstr("needs a value"));
}

// Runs the bench with `flags` and returns its report, or the failure.
std::string ReportOf(const OverheadBenchFlags& flags) {
  const absl::Status status = RunOverheadBench(flags);
  if (!status.ok()) return "failed: " + std::string(status.message());
  std::stringstream report;
  report << std::ifstream(flags.out_dir + "/overhead_bench.md").rdbuf();
  return report.str();
}

TEST(OverheadBenchTest, ReportsMeasuredAndPredictedTimesOnTheCpu) {
  const std::string out = ::testing::TempDir() + "/overhead_bench_" + std::to_string(::getpid());
  OverheadBenchFlags flags;
  flags.target_shape = kRoot + "/models/speclab-target/config.json";
  flags.drafter_shape = kRoot + "/models/speclab-drafter/config.json";
  flags.gamma = 2;
  flags.new_tokens = 4;
  flags.prompt_tokens = 8;
  flags.prompts = 1;
  flags.device = "cpu";
  flags.out_dir = out;
  const std::string report = ReportOf(flags);
  EXPECT_THAT(report, HasSubstr("| autoregressive | 0 |"));
  EXPECT_THAT(report, HasSubstr("| chain_g2, step by step | 1 |"));
  EXPECT_THAT(report, HasSubstr("| chain_g2, pipelined | 1 |"));
  EXPECT_THAT(report, HasSubstr("overhead us/step"));
  EXPECT_THAT(report, HasSubstr("host time not hidden us/step"));
  // Another chain rule's device form; a rule without one is refused by name.
  flags.verifier = "block";
  EXPECT_THAT(ReportOf(flags), HasSubstr("| chain_g2_block, pipelined | 1 |"));
  flags.verifier = "specinfer";
  EXPECT_THAT(ReportOf(flags), HasSubstr("| chain_g2_specinfer, pipelined | 1 |"));
  // A length policy's stop on the device, in place of the fixed gamma; one
  // that drafts past the bench's room is refused.
  flags.verifier = "rejection";
  flags.length_policy = "{type: confidence, threshold: 0, max: 2}";
  EXPECT_THAT(ReportOf(flags), HasSubstr("| chain_g2_confidence, pipelined | 1 |"));
  flags.length_policy = "{type: confidence, threshold: 0, max: 3}";
  EXPECT_THAT(ReportOf(flags), HasSubstr("--length-policy drafts up to 3 tokens, more than --gamma 2"));
  flags.length_policy = "";
  flags.verifier = "host_only_rrs";  // tests/support/host_only_verifier.cc
  EXPECT_THAT(ReportOf(flags), HasSubstr("--verifier host_only_rrs has no device form"));
  // A dynamic tree verified by point_mass, pipelined as chains are.
  flags.verifier = "point_mass";
  flags.tree_builder = "{type: dynamic_topk, top_k: 2, depth: 2, total_tokens: 5}";
  EXPECT_THAT(ReportOf(flags), HasSubstr("| dynamic_topk_point_mass, pipelined | 1 |"));
  flags.tree_builder = "{type: dynamic_topk, top_k: 2, depth: 2, total_tokens: 5, width: 3}";
  EXPECT_THAT(ReportOf(flags), HasSubstr("width"));
  // Prompt lookup in place of the drafter LM, pipelined with point_mass.
  flags.tree_builder = "";
  flags.drafter = "{type: prompt_lookup, max_ngram_size: 2, num_pred_tokens: 2}";
  EXPECT_THAT(ReportOf(flags), HasSubstr("| prompt_lookup_g2_point_mass, pipelined | 1 |"));
  flags.drafter = "{type: model, path: " + kRoot + "/models/speclab-drafter}";
  EXPECT_THAT(ReportOf(flags), HasSubstr("model-free drafters"));
  // A head drafter: its captured work is priced as the forwards are.
  flags.drafter = "{type: medusa, heads: 2}";
  flags.verifier = "rejection";
  const std::string heads = ReportOf(flags);
  EXPECT_THAT(heads, HasSubstr("The drafter's captured work (DeviceGraphs), priced like the forwards"));
  EXPECT_THAT(heads, HasSubstr(", pipelined | 1 |"));
  RemoveTree(out);
}

TEST(OverheadBenchTest, MismatchedVocabulariesAreAnError) {
  OverheadBenchFlags flags;
  flags.target_shape = kRoot + "/models/speclab-target/config.json";
  flags.drafter_shape = kRoot + "/configs/shapes/llama-3.2-1b.json";  // 128256 tokens vs 8000
  flags.device = "cpu";
  flags.new_tokens = 2;
  // Checked from the configs, before anything is allocated.
  EXPECT_THAT(std::string(RunOverheadBench(flags).message()), HasSubstr("the drafter shape has 128256 tokens"));
}

// Unknown plugins are refused before the 8B and 1B shapes' random weights
// are built (which takes minutes on a CPU), naming the flag.
TEST(OverheadBenchTest, UnknownPluginsAreRefusedBeforeAnyModelIsBuilt) {
  OverheadBenchFlags flags;
  flags.target_shape = kRoot + "/configs/shapes/llama-3.1-8b.json";
  flags.drafter_shape = kRoot + "/configs/shapes/llama-3.2-1b.json";
  flags.device = "cpu";
  flags.verifier = "nope";
  EXPECT_THAT(std::string(RunOverheadBench(flags).message()), HasSubstr("--verifier:1: key 'type': unknown verifier 'nope'"));
  flags.verifier = "rejection";
  flags.tree_builder = "{type: dynamic_topk, top_k: 0}";
  EXPECT_THAT(std::string(RunOverheadBench(flags).message()), HasSubstr("--tree-builder:1: key 'top_k'"));
  flags.tree_builder = "";
  flags.drafter = "{type: lookup}";
  EXPECT_THAT(std::string(RunOverheadBench(flags).message()), HasSubstr("--drafter:1: key 'type': unknown drafter 'lookup'"));
  flags.drafter = "";
  flags.length_policy = "{type: confidence, treshold: 0}";
  EXPECT_THAT(std::string(RunOverheadBench(flags).message()), HasSubstr("--length-policy"));
}

}  // namespace
}  // namespace speclab
