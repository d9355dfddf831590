// The device form of typical acceptance, a deterministic rule: the host
// rule's verdict on every draft tree of the catalogue, at T = 1 and on
// one-hot rows (with the greedy flag and without), and its options.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "framework/core/options.h"
#include "framework/device/device_verifier.h"
#include "tests/support/exact_enumeration.h"

namespace speclab {
namespace enumeration_test {
namespace {

TEST(TypicalDeviceTest, VerdictsEqualTheHostRules) {
  EXPECT_GT(ExpectDeviceVerdictsEqualTheHostRules("typical", {DraftMode::kTopK, DraftMode::kIndependent}), 100);
}

// root -> {a = 0, b = 1}; a -> c = 2, every row (0.6, 0.3, 0.1): H = 0.898
// nats, δ·exp(-H) = 0.122 for δ = 0.3. With ε = 0.09 p(c) = 0.1 passes; with
// ε = 0.2 it does not (typical_verifier_test.cc's case).
TEST(TypicalDeviceTest, ReadsEpsilonAndDelta) {
  DeviceTreeProblem problem{.tokens = at::tensor(std::vector<int64_t>{0, 0, 1, 2}),
                            .parents = at::tensor(std::vector<int64_t>{-1, 0, 0, 1}),
                            .target_probs = at::tensor({0.6f, 0.3f, 0.1f}).repeat({4, 1})};
  at::Generator generator = at::detail::createCPUGenerator(1);
  for (const auto& [yaml, accepted] : {std::pair<const char*, int64_t>{"{posterior_threshold: 0.09}", 2},
                                       std::pair<const char*, int64_t>{"{posterior_threshold: 0.2}", 1}}) {
    auto options = Options::FromString(yaml, "test");
    ASSERT_TRUE(options.ok());
    auto rule = DeviceVerifierRegistry::Find("typical")->create(*options);
    ASSERT_TRUE(rule.ok()) << rule.status();
    auto walk = (*rule)->VerifyTree(problem, generator);
    ASSERT_TRUE(walk.ok()) << walk.status();
    EXPECT_EQ((*walk)[0].item<int64_t>(), accepted) << yaml;
    EXPECT_EQ((*walk)[1].item<int64_t>(), 1) << yaml;  // a
    EXPECT_EQ((*walk)[4].item<int64_t>(), 0) << yaml;  // argmax p
  }
}

}  // namespace
}  // namespace enumeration_test
}  // namespace speclab
