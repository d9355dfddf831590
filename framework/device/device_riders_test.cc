// Riders on the device: where AppendRiders puts them in a tree's forward (the
// step-by-step engine's placement: after the nodes, at the root's position
// plus their offsets, seeing the root and their own riders, unseen by the
// nodes), and several drafters' riders gathered and their logits split.
#include "framework/device/device_riders.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "framework/drafter.h"

namespace speclab {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::vector<int64_t> Values(const at::Tensor& t) {
  const at::Tensor host = t.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
}

// Two riders: the first at offset 1 sees itself, the second at offset 2 sees both.
RiderTokens TwoRiders(int32_t first, int32_t second) {
  return {.tokens = {first, second}, .offsets = {1, 2}, .sees = {1, 0, 1, 1}};
}

TEST(DeviceRidersTest, RidersFollowTheTreeSeeingTheRootAndTheirOwn) {
  // A root and two children: depths 0, 1, 1.
  const at::Tensor tokens = at::tensor(std::vector<int64_t>{7, 8, 9});
  const at::Tensor depths = at::tensor(std::vector<int64_t>{0, 1, 1});
  const at::Tensor mask = at::tensor(std::vector<int64_t>{1, 0, 0, 1, 1, 0, 1, 0, 1}).view({3, 3}).to(at::kBool);
  const RiderTokens host = TwoRiders(4, 5);
  const DeviceRiders riders = ToDeviceRiders(host, at::tensor(std::vector<int64_t>{4, 5}));
  ASSERT_EQ(riders.size(), 2);
  auto in = AppendRiders(tokens, depths, mask, riders);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_THAT(Values(in->tokens), ElementsAre(7, 8, 9, 4, 5));
  EXPECT_THAT(Values(in->depths), ElementsAre(0, 1, 1, 1, 2));
  EXPECT_THAT(Values(in->mask), ElementsAreArray({1, 0, 0, 0, 0,    // the root
                                                  1, 1, 0, 0, 0,    // its children: no rider
                                                  1, 0, 1, 0, 0,
                                                  1, 0, 0, 1, 0,    // rider 0: the root, itself
                                                  1, 0, 0, 1, 1}));  // rider 1: the root, rider 0, itself
  // Without riders the tree is as it was; misshapen riders are refused.
  auto alone = AppendRiders(tokens, depths, mask, DeviceRiders());
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(at::equal(alone->mask, mask));
  DeviceRiders bad = riders;
  bad.sees = riders.sees.narrow(0, 0, 1);
  EXPECT_FALSE(AppendRiders(tokens, depths, mask, bad).ok());
}

TEST(DeviceRidersTest, GatheredPartsSeeOnlyTheirOwnAndGetTheirRowsBack) {
  const DeviceRiders first = ToDeviceRiders(TwoRiders(4, 5), at::tensor(std::vector<int64_t>{4, 5}));
  const DeviceRiders second = ToDeviceRiders(TwoRiders(6, 7), at::tensor(std::vector<int64_t>{6, 7}));
  const DeviceRiders all = GatherDeviceRiders({first, DeviceRiders(), second});
  EXPECT_THAT(Values(all.tokens), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(Values(all.offsets), ElementsAre(1, 2, 1, 2));
  EXPECT_THAT(Values(all.sees), ElementsAreArray({1, 0, 0, 0,  //
                                                  1, 1, 0, 0,  //
                                                  0, 0, 1, 0,  //
                                                  0, 0, 1, 1}));
  const at::Tensor logits = at::arange(12, at::kFloat).view({4, 3});
  const std::vector<at::Tensor> rows = SplitRiderLogits(logits, {2, 0, 2});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(at::equal(rows[0], logits.narrow(0, 0, 2)));
  EXPECT_EQ(rows[1].size(0), 0);
  EXPECT_TRUE(at::equal(rows[2], logits.narrow(0, 2, 2)));
  EXPECT_EQ(GatherDeviceRiders({}).size(), 0);
}

}  // namespace
}  // namespace speclab
