// The checks every q-reading rule runs before trusting a problem: a draft
// whose sampling mode the rule is not exact for is refused, naming the rule,
// the modes it takes and the one it got (the engine never lets such a step
// reach a rule: at T = 0 top-k drafts go to greedy exact match).
#include "algorithms/verifiers/common/problem_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "framework/core/token_tree.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;

VerificationProblem TwoNodeProblem(const TokenTree& tree, DraftSampling sampling) {
  VerificationProblem problem{.tree = &tree, .target = ProbabilityRows(2, 3), .target_argmax = {0, 1},
                              .draft = ProbabilityRows(2, 3), .sampling = sampling};
  for (int i = 0; i < 2; ++i) problem.target.mutable_row(i)[i] = 1.0, problem.draft.mutable_row(i)[1] = 1.0;
  return problem;
}

TEST(ProblemChecksTest, DraftRowsOfAnotherSamplingModeAreRefused) {
  TokenTree tree(0);
  tree.AddNode(0, 1);
  const VerificationProblem top_k = TwoNodeProblem(tree, DraftSampling::kDeterministic);
  const absl::Status refused =
      verifiers::CheckDraftRows(top_k, "rrs_wor", {DraftSampling::kWithoutReplacement});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("rrs_wor: exact only for drafts sampled as {without_replacement}, got deterministic"));
  EXPECT_TRUE(verifiers::CheckDraftRows(TwoNodeProblem(tree, DraftSampling::kWithoutReplacement), "rrs_wor",
                                        {DraftSampling::kWithoutReplacement})
                  .ok());
  // A missing q row is refused too, with the shapes.
  VerificationProblem no_rows = TwoNodeProblem(tree, DraftSampling::kIndependent);
  no_rows.draft = ProbabilityRows(1, 3);
  EXPECT_THAT(std::string(verifiers::CheckDraftRows(no_rows, "specinfer", {DraftSampling::kIndependent}).message()),
              HasSubstr("needs the draft distribution q of every node (1x3 draft rows for 2 nodes"));
}

}  // namespace
}  // namespace speclab
