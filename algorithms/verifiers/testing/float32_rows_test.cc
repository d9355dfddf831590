// Every lossless verifier on rows rounded to float32, as the engine hands them
// over: rows then sum to 1 only within ~1e-7, and the rules must neither fail
// nor drift beyond that rounding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "framework/core/float_bounds.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

struct Case {
  std::string verifier;
  DraftMode mode;
  bool chains_only;
  bool greedy_target;
};

TEST(VerifierFloat32RowsTest, LosslessVerifiersStayWithinRounding) {
  const std::vector<Case> cases = {
      {"greedy", DraftMode::kTopK, false, true},
      {"rejection", DraftMode::kIndependent, true, false},
      {"block", DraftMode::kIndependent, true, false},
      {"point_mass", DraftMode::kTopK, false, false},
      {"specinfer", DraftMode::kIndependent, false, false},
      {"rrs", DraftMode::kIndependent, false, false},
      {"rrs_wor", DraftMode::kWithoutReplacement, false, false},
      {"spectr", DraftMode::kIndependent, false, false},
      {"khisti", DraftMode::kIndependent, false, false},
      {"traversal", DraftMode::kWithoutReplacement, false, false},
  };
  for (const Case& c : cases) {
    auto verifier = MakeVerifier(c.verifier);
    ASSERT_NE(verifier, nullptr);
    std::vector<Instance> instances;
    for (const std::vector<int>& shape :
         c.chains_only ? std::vector<std::vector<int>>{{1, 1, 1}} : std::vector<std::vector<int>>{{2, 1}, {1, 2}}) {
      Instance instance = MakeInstance(shape, 4, c.mode, 53);
      instance.target.float32 = instance.draft.float32 = true;
      instance.target.concentration = instance.draft.concentration = 0.5;
      instance.target.one_hot = c.greedy_target;
      instances.push_back(instance);
    }
    // Each float32 entry is within u32 of its float64 value and a row's sum of
    // 4 within gamma(4): every outcome's probability is a product of at most
    // 16 such factors (drafts, choices, continuation, depth 3), so the law
    // moves by at most 16 gamma(5) from the float64 rule's.
    EXPECT_LT(MaxLawError(*verifier, instances), 16 * float_bounds::Gamma(5, float_bounds::kFloat32Roundoff))
        << c.verifier;
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
