#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "algorithms/tree_builders/testing/builder_harness.h"
#include "algorithms/tree_builders/testing/table_drafter.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::HasSubstr;

constexpr char kAcceptance[] = "[0.65, 0.10, 0.05, 0.03, 0.02, 0.015, 0.01, 0.008]";

TEST(SequoiaTreeBuilderTest, BuildsTheOptimalTreeOfTheBudget) {
  auto builder = BuilderFromYaml(std::string("{type: sequoia, budget: 16, max_depth: 6, acceptance: ") + kAcceptance + "}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  EXPECT_TRUE((*builder)->traits().samples_tokens);
  TableDrafter drafter(16, 4);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_EQ(draft->tree.size(), 16);
  EXPECT_LE(draft->tree.max_depth(), 6);
  EXPECT_EQ(draft->sampling, DraftSampling::kWithoutReplacement);
  EXPECT_EQ(draft->draft_probs.size(0), 16);
  for (int i = 1; i < draft->tree.size(); ++i) EXPECT_LT(draft->tree.parent(i), i);
  // One forward per level with children.
  EXPECT_EQ(static_cast<int>(drafter.calls().size()), draft->tree.max_depth());
  // p_1 dominates: the rank-0 chain is the deepest path.
  EXPECT_GE(draft->tree.max_depth(), 4);

  auto greedy = BuildOnce(**builder, drafter, {.sampling = {.temperature = 0}});
  ASSERT_TRUE(greedy.ok());
  EXPECT_EQ(greedy->sampling, DraftSampling::kDeterministic);
  EXPECT_EQ(greedy->tree.size(), 16);
}

TEST(SequoiaTreeBuilderTest, ReadsAcceptanceAndLatencyFromAMeasuredFile) {
  const std::string file = (std::filesystem::temp_directory_path() / "sequoia_acceptance_test.yaml").string();
  std::ofstream(file) << "acceptance: " << kAcceptance << "\nsteps: 100\n"
                      << "latency_profile:\n  budgets: [1, 2, 4, 8, 16, 32]\n"
                      << "  target_ms: [10, 10, 10, 12, 14, 18]\n  draft_ms: 0.3\n";
  auto builder = BuilderFromYaml("{type: sequoia, acceptance_file: " + file + ", latency_profile_file: " + file + "}");
  ASSERT_TRUE(builder.ok()) << builder.status();
  TableDrafter drafter(16, 4);
  auto draft = BuildOnce(**builder, drafter, {});
  ASSERT_TRUE(draft.ok()) << draft.status();
  EXPECT_GE(draft->tree.size(), 2);
  EXPECT_LE(draft->tree.size(), 32);
  std::filesystem::remove(file);
}

TEST(SequoiaTreeBuilderTest, OptionErrorsNameFileLineAndKey) {
  auto missing = BuilderFromYaml("type: sequoia\nbudget: 8\n", "s.yaml");
  EXPECT_THAT(missing.status().message(), HasSubstr("s.yaml:1: key 'acceptance': missing"));
  auto both = BuilderFromYaml(std::string("type: sequoia\nacceptance: ") + kAcceptance +
                                  "\nlatency_profile: {budgets: [2], target_ms: [1], draft_ms: 0.1}\nbudget: 8\n",
                              "s.yaml");
  EXPECT_THAT(both.status().message(), HasSubstr("s.yaml:4: key 'budget': give exactly one"));
  auto too_much = BuilderFromYaml("type: sequoia\nbudget: 8\nacceptance: [0.7, 0.5]\n", "s.yaml");
  EXPECT_THAT(too_much.status().message(), HasSubstr("s.yaml:3: key 'acceptance': values sum to 1.2"));
  auto bad_profile = BuilderFromYaml(std::string("type: sequoia\nacceptance: ") + kAcceptance +
                                         "\nlatency_profile:\n  budgets: [2, 4]\n  target_ms: [1]\n  draft_ms: 0.1\n",
                                     "s.yaml");
  EXPECT_THAT(bad_profile.status().message(), HasSubstr("s.yaml:5: key 'latency_profile.target_ms'"));
  auto bad_budget = BuilderFromYaml(std::string("{type: sequoia, budget: 1, acceptance: ") + kAcceptance + "}", "s.yaml");
  EXPECT_THAT(bad_budget.status().message(), HasSubstr("key 'budget'"));
  auto no_file = BuilderFromYaml("{type: sequoia, budget: 8, acceptance_file: /nonexistent.yaml}", "s.yaml");
  EXPECT_THAT(no_file.status().message(), HasSubstr("key 'acceptance_file'"));
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
