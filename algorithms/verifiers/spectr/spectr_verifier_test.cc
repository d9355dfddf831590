#include <gtest/gtest.h>

#include <cmath>

#include "algorithms/verifiers/spectr/k_seq.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(SpecTrVerifierTest, TraitsAndOptions) {
  auto verifier = MakeVerifier("spectr");
  ASSERT_NE(verifier, nullptr);
  EXPECT_EQ(verifier->traits().losslessness, Losslessness::kLossless);
  EXPECT_TRUE(verifier->traits().needs_draft_distributions);
  EXPECT_FALSE(verifier->traits().chain_only);
  EXPECT_TRUE(CreateStatus("spectr", "{bisection_steps: 30}").ok());
  EXPECT_FALSE(CreateStatus("spectr", "{bisection_steps: 0}").ok());
  EXPECT_FALSE(CreateStatus("spectr", "{bisection: 30}").ok());
}

TEST(SpecTrVerifierTest, RhoIsTheValidSideOfTheRoot) {
  enumeration::TableModel p({.vocab = 6, .seed = 1}), q({.vocab = 6, .seed = 2});
  for (int k : {1, 2, 3, 5, 8}) {
    for (int context = 0; context < 20; ++context) {
      const std::vector<double>& pr = p.Row({context});
      const std::vector<double>& qr = q.Row({context});
      const double rho = verifiers::KSeqRho(pr, qr, k, 60);
      ASSERT_GE(rho, 1.0);
      ASSERT_LE(rho, std::max(1.0, static_cast<double>(k)));
      const double beta = verifiers::KSeqBeta(pr, qr, rho);
      EXPECT_LE(1 - std::pow(1 - beta, k),
                rho * beta + kLosslessTolerance);  // validity
      if (rho > 1.0) {
        // A probe (not a tolerance): far beyond the bisection's last interval,
        // (k - 1) 2^-60, and the validity test's rounding (~1e-15), so that
        // the rule, not rounding, decides that rho - 1e-9 is invalid.
        const double below = rho - 1e-9;
        const double beta_below = verifiers::KSeqBeta(pr, qr, below);
        EXPECT_GT(1 - std::pow(1 - beta_below, k), below * beta_below);  // smallest valid ρ
      }
      for (double r : verifiers::KSeqResidual(pr, qr, k, rho)) EXPECT_GE(r, 0.0);
    }
  }
}

TEST(SpecTrVerifierTest, LosslessForIidDrafts) {
  auto verifier = MakeVerifier("spectr");
  ASSERT_NE(verifier, nullptr);
  ExpectLossless(*verifier, Catalogue(DraftMode::kIndependent, false), "spectr (iid)");
}

TEST(SpecTrVerifierTest, MatchesTheComputedFigure2Setting) {
  auto verifier = MakeVerifier("spectr");
  ASSERT_NE(verifier, nullptr);
  for (const Figure2Row& row : Figure2Table()) {
    const double acceptance = ExpectedAccepted(*verifier, Figure2Instance(row.q2));
    EXPECT_NEAR(acceptance, row.spectr, kTableRounding) << "q2=" << row.q2;
    EXPECT_GE(acceptance, row.specinfer - kTableRounding) << "K-SEQ is at least MSS here";
  }
}

TEST(SpecTrVerifierTest, MatchesGreedyAtTemperatureZero) {
  auto verifier = MakeVerifier("spectr");
  ASSERT_NE(verifier, nullptr);
  for (std::vector<int> shape : {std::vector<int>{1, 1, 1}, {2, 1}, {1, 2}, {2, 2}, {3}}) {
    Instance instance = MakeInstance(shape, 4, DraftMode::kIndependent, 31);
    instance.target.one_hot = instance.draft.one_hot = true;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
    instance.draft.one_hot = false;
    EXPECT_GT(ExpectGreedyAtTemperatureZero(*verifier, instance), 0);
  }
}

TEST(SpecTrVerifierTest, RefusesDraftsThatAreNotIid) {
  auto verifier = MakeVerifier("spectr");
  ASSERT_NE(verifier, nullptr);
  for (DraftMode mode : {DraftMode::kPerChildIndependent, DraftMode::kWithoutReplacement, DraftMode::kTopK})
    EXPECT_EQ(VerifyOnceStatus(*verifier, MakeInstance({2}, 4, mode, 1)).code(), absl::StatusCode::kInvalidArgument)
        << enumeration::DraftModeName(mode);
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
