#include "algorithms/verifiers/testing/law_check.h"

#include <gtest/gtest.h>

#include <set>

#include "algorithms/verifiers/testing/choice_enumerator.h"

namespace speclab {
namespace enumeration {
namespace {

// Ignores the drafts and samples the extra token from p(.|root): lossless.
class SampleTargetVerifier final : public Verifier {
 public:
  VerifierTraits traits() const override { return {}; }
  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const override {
    return Verdict{.accepted = {}, .extra_token = random.Categorical(problem.target.row(0))};
  }
};

// Always accepts the first child and emits the argmax: lossy at T > 0.
class AcceptFirstVerifier final : public Verifier {
 public:
  VerifierTraits traits() const override { return {}; }
  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource&) const override {
    const int child = problem.tree->children(0).front();
    return Verdict{.accepted = {child}, .extra_token = problem.target_argmax[child]};
  }
};

Instance TestInstance(std::vector<int> branching, DraftMode mode) {
  Instance instance;
  instance.branching = std::move(branching);
  instance.mode = mode;
  instance.target = {.vocab = 4, .seed = 5};
  instance.draft = {.vocab = 4, .seed = 6};
  return instance;
}

TEST(ExactEnumerationTest, TableModelsAreDeterministicDistributions) {
  TableModel a({.vocab = 5, .seed = 9}), b({.vocab = 5, .seed = 9}), c({.vocab = 5, .seed = 10});
  const std::vector<double>& row = a.Row({0, 3});
  EXPECT_EQ(row, b.Row({0, 3}));
  EXPECT_NE(row, c.Row({0, 3}));
  EXPECT_NE(row, a.Row({0, 2}));
  EXPECT_NE(row, a.Row({0, 3}, /*salt=*/1));
  double total = 0;
  for (double v : row) total += v;
  EXPECT_NEAR(total, 1.0, float_bounds::Gamma(6, float_bounds::kFloat64Roundoff));  // 5 entries normalised, summed
  TableModel hot({.vocab = 5, .seed = 9, .one_hot = true});
  const std::vector<double>& one_hot = hot.Row({0, 3});
  const auto argmax = std::max_element(row.begin(), row.end()) - row.begin();
  EXPECT_EQ(one_hot[argmax], 1.0);
  EXPECT_EQ(std::count(one_hot.begin(), one_hot.end(), 0.0), 4);
}

TEST(ExactEnumerationTest, DraftLawsAreExact) {
  for (DraftMode mode : {DraftMode::kIndependent, DraftMode::kWithoutReplacement, DraftMode::kPerChildIndependent}) {
    const Instance instance = TestInstance({2, 1}, mode);
    InstanceModels models(instance);
    const std::vector<double>& q = models.draft.Row({0});
    double total = 0;
    ASSERT_TRUE(ForEachDraft(instance, models, [&](const DraftedTree& drafted, double probability) {
                  total += probability;
                  EXPECT_EQ(drafted.tree.size(), 5);
                  const int32_t a = drafted.tree.token(1), b = drafted.tree.token(2);
                  if (mode == DraftMode::kWithoutReplacement) {
                    EXPECT_NE(a, b);
                  }
                  // The root's two children, then one child each.
                  double expected = 0;
                  switch (mode) {
                    case DraftMode::kIndependent:
                      expected = q[a] * q[b];
                      break;
                    case DraftMode::kWithoutReplacement:
                      expected = q[a] * q[b] / (1 - q[a]);
                      break;
                    default:
                      expected = models.draft.Row({0}, 1)[a] * models.draft.Row({0}, 2)[b];
                      break;
                  }
                  const int salt = mode == DraftMode::kPerChildIndependent ? 1 : 0;
                  expected *= models.draft.Row({0, a}, salt)[drafted.tree.token(3)];
                  expected *= models.draft.Row({0, b}, salt)[drafted.tree.token(4)];
                  // Products of 4 factors in two orders.
                  EXPECT_NEAR(probability, expected, 2 * float_bounds::Gamma(4, float_bounds::kFloat64Roundoff));
                  return absl::OkStatus();
                }).ok());
    EXPECT_NEAR(total, 1.0, LosslessTolerance()) << DraftModeName(mode);
  }
}

TEST(ExactEnumerationTest, TopKDraftsAreDeterministicAndTokenOnly) {
  const Instance instance = TestInstance({3}, DraftMode::kTopK);
  InstanceModels models(instance);
  int trees = 0;
  ASSERT_TRUE(ForEachDraft(instance, models, [&](const DraftedTree& drafted, double probability) {
                ++trees;
                EXPECT_EQ(probability, 1.0);
                const std::vector<double>& q = models.draft.Row({0});
                EXPECT_GE(q[drafted.tree.token(1)], q[drafted.tree.token(2)]);
                EXPECT_GE(q[drafted.tree.token(2)], q[drafted.tree.token(3)]);
                const VerificationProblem problem = MakeProblem(instance, models.target, drafted);
                EXPECT_TRUE(problem.draft.empty());
                EXPECT_EQ(problem.sampling, DraftSampling::kDeterministic);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(trees, 1);
}

TEST(ExactEnumerationTest, ProblemsCarryTargetRowsArgmaxAndUnmaskedDraftRows) {
  const Instance instance = TestInstance({2}, DraftMode::kWithoutReplacement);
  InstanceModels models(instance);
  ASSERT_TRUE(ForEachDraft(instance, models, [&](const DraftedTree& drafted, double) {
                const VerificationProblem problem = MakeProblem(instance, models.target, drafted);
                EXPECT_EQ(problem.sampling, DraftSampling::kWithoutReplacement);
                for (int node = 0; node < drafted.tree.size(); ++node) {
                  const std::vector<double>& p = models.target.Row(drafted.tree.PathTokens(node));
                  EXPECT_TRUE(std::equal(p.begin(), p.end(), problem.target.row(node).begin()));
                  EXPECT_EQ(problem.target_argmax[node], std::max_element(p.begin(), p.end()) - p.begin());
                }
                const std::vector<double>& q = models.draft.Row({0});
                for (int node : {1, 2}) EXPECT_TRUE(std::equal(q.begin(), q.end(), problem.draft.row(node).begin()));
                return absl::OkStatus();
              }).ok());
}

TEST(ExactEnumerationTest, LawCheckAcceptsALosslessRuleAndFlagsALossyOne) {
  const Instance instance = TestInstance({2, 1}, DraftMode::kIndependent);
  auto lossless = CheckExactly(SampleTargetVerifier(), instance);
  ASSERT_TRUE(lossless.ok()) << lossless.status();
  EXPECT_LT(lossless->max_abs_error, LosslessTolerance());
  EXPECT_NEAR(lossless->total_probability, 1.0, LosslessTolerance());
  EXPECT_EQ(lossless->expected_accepted, 0.0);
  auto lossy = CheckExactly(AcceptFirstVerifier(), instance);
  ASSERT_TRUE(lossy.ok()) << lossy.status();
  EXPECT_GT(lossy->max_abs_error,
            1e-2);  // an error of order one, far beyond rounding
  EXPECT_GT(lossy->tv, 1e-2);
  EXPECT_EQ(lossy->expected_accepted, 1.0);
}

TEST(ExactEnumerationTest, SampledTvIsWithinItsBoundForALosslessRule) {
  const Instance instance = TestInstance({1, 1}, DraftMode::kIndependent);
  auto sampled = SampleAgainstTarget(SampleTargetVerifier(), instance, 20000, 3);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_EQ(sampled->cells, 64);
  EXPECT_LE(sampled->tv, sampled->bound);
  auto lossy = SampleAgainstTarget(AcceptFirstVerifier(), instance, 20000, 3);
  ASSERT_TRUE(lossy.ok()) << lossy.status();
  EXPECT_GT(lossy->tv, lossy->bound);
}

TEST(ExactEnumerationTest, RejectsVerdictsThatAreNotRootDownPaths) {
  TokenTree tree(0);
  tree.AddNode(0, 1);
  tree.AddNode(1, 2);
  EXPECT_FALSE(EmittedTokens(tree, {.accepted = {2}, .extra_token = 0}, 3).ok());
  EXPECT_FALSE(EmittedTokens(tree, {.accepted = {1}, .extra_token = 3}, 3).ok());
  auto ok = EmittedTokens(tree, {.accepted = {1, 2}, .extra_token = 0}, 3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::vector<int32_t>{1, 2, 0}));
}

}  // namespace
}  // namespace enumeration
}  // namespace speclab
