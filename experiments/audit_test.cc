#include "experiments/audit.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "algorithms/verifiers/testing/law_check.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace {

TEST(AuditTest, LosslessVerifiersPassAndTypicalIsMeasuredLossy) {
  const auto start = std::chrono::steady_clock::now();
  auto rows = AuditAllVerifiers(/*seed=*/2024);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::set<std::string> seen;
  for (const AuditRow& row : *rows) {
    seen.insert(row.verifier);
    std::printf("[ audit ] %-10s %-8s exact_tv %.3g sampled_tv %.4f bound %.4f %s | %s\n", row.verifier.c_str(),
                row.claimed_lossless ? "lossless" : "lossy", row.exact_tv, row.sampled_tv, row.bound,
                row.pass ? "pass" : "FAIL", row.note.c_str());
    EXPECT_TRUE(row.pass) << row.verifier << ": " << row.note;
    if (row.claimed_lossless) {
      EXPECT_LT(row.exact_tv, enumeration::LosslessTolerance()) << row.verifier;
      EXPECT_LE(row.sampled_tv, row.bound) << row.verifier;
    }
    if (row.verifier == "typical") {
      EXPECT_FALSE(row.claimed_lossless);
      EXPECT_GT(row.exact_tv, enumeration_test::kLossyThreshold);
    }
  }
  std::printf("[ audit ] %zu verifiers in %.1f s\n", rows->size(), seconds);
  for (const char* name : {"greedy", "rejection", "point_mass", "specinfer", "rrs", "rrs_wor", "spectr", "khisti",
                           "block", "traversal", "typical"})
    EXPECT_TRUE(seen.count(name)) << name << " is not registered";
}

}  // namespace
}  // namespace speclab
