// EngineForms: how each method's steps ran, and what stepping on the host costs.
#include "experiments/summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace speclab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

RunRecord Record(const std::string& method, const std::string& form) {
  RunRecord r{.method = method, .task = "t"};
  r.generation.engine_form = form;
  return r;
}

TEST(EngineFormsTest, SaysWhyAndWhatAStepCosts) {
  const std::vector<RunRecord> records = {Record("baseline", "autoregressive"), Record("fast", "pipelined chain"),
                                          Record("fast", "pipelined chain"),
                                          Record("slow", "step by step: the verifier 'v' has no device form")};
  std::vector<SummaryRow> rows = {{.method = "slow", .task = "all", .temperature = 1},
                                  {.method = "slow", .task = "t", .temperature = 1},
                                  {.method = "fast", .task = "all", .temperature = 1}};
  for (SummaryRow& r : rows) r.has_prediction = true, r.overhead_us_per_step = 3157;
  const std::string out = EngineForms(records, rows, "baseline");
  EXPECT_THAT(out, HasSubstr("- fast: pipelined chain (2 generations)\n"));
  EXPECT_THAT(out, HasSubstr("- slow: step by step: the verifier 'v' has no device form (1 generations; a step costs "
                             "3157 us at T=1 beyond its forwards)\n"));
  EXPECT_THAT(out, Not(HasSubstr("baseline")));
  // Where the overhead is not measured (the CPU), the line says why only.
  for (SummaryRow& r : rows) r.has_overhead = false;
  EXPECT_THAT(EngineForms(records, rows, "baseline"),
              HasSubstr("- slow: step by step: the verifier 'v' has no device form (1 generations)\n"));
}

// Only methods whose length moves get a line, one per temperature.
TEST(DraftedLengthsTest, SharesOfEachLengthForMovingMethods) {
  RunRecord moving = Record("bandit", "step by step");
  moving.temperature = 1;
  for (int length : {1, 4, 4, 4}) moving.generation.steps.push_back(StepStats{.longest_path = length});
  RunRecord fixed = Record("fixed", "pipelined chain");
  for (int i = 0; i < 3; ++i) fixed.generation.steps.push_back(StepStats{.longest_path = 4});
  const std::string out = DraftedLengths({Record("baseline", "autoregressive"), moving, fixed}, "baseline");
  EXPECT_THAT(out, HasSubstr("- bandit, T=1: 1: 25%, 4: 75% (mean 3.25 over 4 steps)"));
  EXPECT_THAT(out, Not(HasSubstr("fixed")));
  EXPECT_EQ(DraftedLengths({fixed}, "baseline"), "");
}

}  // namespace
}  // namespace speclab
