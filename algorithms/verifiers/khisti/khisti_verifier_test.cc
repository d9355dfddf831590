#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "algorithms/verifiers/khisti/canonical_selection.h"
#include "algorithms/verifiers/testing/choice_enumerator.h"
#include "framework/core/speculation_theory.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

// §1.8's closed form for K i.i.d. drafts (framework/core/speculation_theory.h).
double OptimalAcceptance(const std::vector<double>& p, const std::vector<double>& q, int k) {
  return *theory::OptimalMultiDraftAcceptance(p, q, k);
}

// The law of the token a selection rule picks from K i.i.d. draws from q:
// every draw and the rule's own choice among the distinct draws (in drawn
// order) enumerated exactly.
std::vector<double> EnumeratedSelection(
    const std::vector<double>& q, int k,
    const std::function<int32_t(const std::vector<int32_t>&, RandomSource&)>& select) {
  std::vector<double> law(q.size(), 0.0);
  int32_t selected = -1;
  const absl::Status status = enumeration::EnumerateChoices(
      [&](RandomSource& random) {
        std::vector<int32_t> distinct;
        for (int i = 0; i < k; ++i) {
          const int32_t x = random.Categorical(q);
          if (std::find(distinct.begin(), distinct.end(), x) == distinct.end()) distinct.push_back(x);
        }
        selected = select(distinct, random);
        return absl::OkStatus();
      },
      [&](double probability) {
        law[selected] += probability;
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
  return law;
}

TEST(KhistiVerifierTest, TraitsAndOptions) {
  auto verifier = MakeVerifier("khisti");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  EXPECT_FALSE(verifier->traits().chain_only);
  EXPECT_FALSE(CreateStatus("khisti", "{max_selection_tuples: 0}").ok());
  // A limit below |supp q|^K is refused at Verify() time, not silently approximated.
  auto tight = MakeVerifier("khisti", "{max_selection_tuples: 10}");
  ASSERT_NE(tight, nullptr);
  EXPECT_EQ(VerifyOnceStatus(*tight, MakeInstance({2}, 4, DraftMode::kIndependent, 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KhistiVerifierTest, SelectionLawIsTheExactLawOfTheSelectedToken) {
  enumeration::TableModel p({.vocab = 4, .seed = 3}), q({.vocab = 4, .seed = 4, .concentration = 0.5});
  for (int k : {1, 2, 3}) {
    const std::vector<double>& pr = p.Row({0});
    const std::vector<double>& qr = q.Row({0});
    const std::vector<double> enumerated =
        EnumeratedSelection(qr, k, [&](const std::vector<int32_t>& distinct, RandomSource& random) {
          return distinct[random.Categorical(verifiers::SelectionWeights(pr, qr, distinct))];
        });
    const std::vector<double> law = verifiers::SelectionLaw(pr, qr, k);
    for (int x = 0; x < 4; ++x) EXPECT_NEAR(law[x], enumerated[x], kLosslessTolerance) << "k=" << k << " x=" << x;
    if (k == 1) {
      for (int x = 0; x < 4; ++x) EXPECT_NEAR(law[x], qr[x], kLosslessTolerance);
    }
  }
}

TEST(KhistiVerifierTest, LosslessForIidDrafts) {
  auto verifier = MakeVerifier("khisti");
  ASSERT_NE(verifier, nullptr);
  ExpectLossless(*verifier, Catalogue(DraftMode::kIndependent, false), "khisti (iid)");
}

TEST(KhistiVerifierTest, Figure2OptimumAndTheImportanceRuleBelowIt) {
  auto verifier = MakeVerifier("khisti");
  ASSERT_NE(verifier, nullptr);
  for (const Figure2Row& row : Figure2Table()) {
    const Instance instance = Figure2Instance(row.q2);
    const double optimum = OptimalAcceptance(instance.target.constant_row, instance.draft.constant_row, 2);
    EXPECT_NEAR(optimum, row.optimal, kTableRounding) << "q2=" << row.q2;
    const double acceptance = ExpectedAccepted(*verifier, instance);
    EXPECT_LE(acceptance, optimum + kLosslessTolerance) << "q2=" << row.q2;
    std::printf(
        "[ figure 2 ] q2=%.4f optimal %.4f khisti(p/q) %.4f spectr "
        "%.4f specinfer %.4f\n",
        row.q2, optimum, acceptance, row.spectr, row.specinfer);
  }
}

// The optimised selection (`selection: optimal`): the law it computes is the
// selected token's exact law, the rule is lossless on the catalogue, and on
// Figure 2's instance its acceptance is the optimum, above the p/q rule's.
TEST(KhistiVerifierTest, OptimalSelectionIsExactAndReachesTheOptimum) {
  EXPECT_FALSE(CreateStatus("khisti", "{selection: best}").ok());
  EXPECT_THAT(std::string(CreateStatus("khisti", "{selection: best}").message()), ::testing::HasSubstr("selection"));
  auto optimal = MakeVerifier("khisti", "{selection: optimal}");
  auto importance = MakeVerifier("khisti");
  ASSERT_NE(optimal, nullptr);
  ASSERT_NE(importance, nullptr);
  enumeration::TableModel p({.vocab = 4, .seed = 5}), q({.vocab = 4, .seed = 6, .concentration = 0.5});
  for (int k : {1, 2, 3}) {
    const std::vector<double>& pr = p.Row({0});
    const std::vector<double>& qr = q.Row({0});
    const verifiers::OptimizedSelection table = verifiers::OptimizeSelection(pr, qr, k);
    const std::vector<double> enumerated =
        EnumeratedSelection(qr, k, [&](const std::vector<int32_t>& distinct, RandomSource& random) {
          std::vector<int32_t> set = distinct;
          std::sort(set.begin(), set.end());
          return set[random.Categorical(table.weights.at(set))];
        });
    double accepted = 0;
    for (int x = 0; x < 4; ++x) {
      EXPECT_NEAR(table.law[x], enumerated[x], kLosslessTolerance) << "k=" << k << " x=" << x;
      accepted += std::min(pr[x], table.law[x]);
    }
    EXPECT_NEAR(accepted, OptimalAcceptance(pr, qr, k), kLosslessTolerance) << "k=" << k;
  }
  ExpectLossless(*optimal, Catalogue(DraftMode::kIndependent, false), "khisti (optimal selection)");
  for (const Figure2Row& row : Figure2Table()) {
    const Instance instance = Figure2Instance(row.q2);
    const double optimum = OptimalAcceptance(instance.target.constant_row, instance.draft.constant_row, 2);
    const double reached = ExpectedAccepted(*optimal, instance);
    EXPECT_NEAR(reached, optimum, kLosslessTolerance) << "q2=" << row.q2;
    EXPECT_GE(reached, ExpectedAccepted(*importance, instance) - kLosslessTolerance) << "q2=" << row.q2;
    std::printf("[ figure 2 ] q2=%.4f optimal %.4f khisti(optimal selection) %.4f\n", row.q2, optimum, reached);
  }
}


TEST(KhistiVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("khisti");
  ASSERT_NE(verifier, nullptr);
  for (std::vector<int> shape : {std::vector<int>{1, 1, 1}, {2, 1}, {1, 2}, {2, 2}, {3}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kIndependent, 37);
    instance.target.one_hot = instance.draft.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
    instance.draft.one_hot = false;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
  }
}

TEST(KhistiVerifierTest, RefusesDraftsThatAreNotIid) {
  auto verifier = MakeVerifier("khisti");
  ASSERT_NE(verifier, nullptr);
  for (DraftMode mode : {DraftMode::kPerChildIndependent, DraftMode::kWithoutReplacement, DraftMode::kTopK})
    EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({2}, 4, mode, 1)).code(), absl::StatusCode::kInvalidArgument)
        << enumeration::DraftModeName(mode);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
