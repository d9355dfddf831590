#include "algorithms/tree_builders/common/draft_ops.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace speclab {
namespace tree_builders {
namespace {

// Gumbel-top-k must give ordered draws without replacement:
// P(first = a, second = b) = q(a) · q(b) / (1 − q(a)).
TEST(DraftOpsTest, DrawWithoutReplacementHasTheSequentialLaw) {
  constexpr int kDraws = 40000;
  const std::vector<float> q = {0.5f, 0.3f, 0.15f, 0.05f, 0.0f};
  at::Generator generator = MakeGenerator(c10::Device(c10::kCPU), 17);
  TopK top = DrawWithoutReplacement(at::tensor(q).unsqueeze(0).repeat({kDraws, 1}), 3, generator);
  std::map<std::pair<int64_t, int64_t>, int> counts;
  for (int i = 0; i < kDraws; ++i) {
    ++counts[{top.tokens[i][0].item<int64_t>(), top.tokens[i][1].item<int64_t>()}];
    EXPECT_TRUE(std::isfinite(top.scores[i][2].item<double>()));  // three tokens have mass
  }
  double chi2 = 0;
  int cells = 0;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a == b) continue;
      const double expected = kDraws * q[a] * q[b] / (1 - q[a]);
      const double observed = counts[{a, b}];
      chi2 += (observed - expected) * (observed - expected) / expected;
      ++cells;
    }
  }
  EXPECT_LT(chi2, 40.0) << "11 degrees of freedom; 40 is beyond the 1e-4 quantile";
  // The zero-probability token is never drawn while mass remains, and is
  // marked -inf once it is all that is left.
  TopK all = DrawWithoutReplacement(at::tensor(q).unsqueeze(0), 5, generator);
  EXPECT_EQ(all.tokens[0][4].item<int64_t>(), 4);
  EXPECT_TRUE(std::isinf(all.scores[0][4].item<double>()));
}

TEST(DraftOpsTest, ReadToHostPacksPartsInOrder) {
  const std::vector<double> host = ReadToHost({at::tensor({3, 4}, at::kLong), at::tensor({0.5f})});
  EXPECT_EQ(host, std::vector<double>({3, 4, 0.5}));
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
