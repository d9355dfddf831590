// Keys of device picks are derived from the function and its declared
// parameters (framework/device/pick_key.h): a graph cached under a key is
// replayed only for picks that compute the same thing. (A pick that captures
// anything does not compile: ChainPick::Of's static_assert.)
#include "framework/device/pick_key.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <tuple>

#include "framework/device/device_model.h"

namespace speclab {
namespace {

using Scaled = std::tuple<double>;

ChainPick ScaledArgmax(double scale, at::Generator* noise = nullptr) {
  return ChainPick::Of(
      [](const Scaled& p, const at::Tensor& logits, const at::Tensor&) {
        return std::make_pair((logits * std::get<0>(p)).argmax(-1), at::Tensor());
      },
      Scaled{scale}, noise);
}

TEST(PickKeyTest, KeysFollowTheFunctionAndEveryParameter) {
  EXPECT_EQ(ScaledArgmax(0.7).key(), ScaledArgmax(0.7).key());
  EXPECT_NE(ScaledArgmax(0.7).key(), ScaledArgmax(0.7000000001).key());  // numbers count exactly
  const ChainPick other = ChainPick::Of([](const Scaled& p, const at::Tensor& logits, const at::Tensor&) {
    return std::make_pair((logits / std::get<0>(p)).argmax(-1), at::Tensor());
  }, Scaled{0.7});
  EXPECT_NE(other.key(), ScaledArgmax(0.7).key());  // another function
  at::Generator generator = at::detail::createCPUGenerator(1);
  EXPECT_NE(ScaledArgmax(0.7, &generator).key(), ScaledArgmax(0.7).key());  // noise drawn for it
  const at::Tensor logits = at::tensor({1.0f, 3.0f, 2.0f}).view({1, 3});
  EXPECT_EQ(ScaledArgmax(2.0)(logits, at::Tensor()).first.item<int64_t>(), 1);
}

TEST(PickKeyTest, TensorsCountByIdentityAndPicksByTheirKeys) {
  using Mapped = std::tuple<LevelPick, at::Tensor>;
  auto level = [](int64_t width) {
    return LevelPick::Of(width, [](const std::tuple<>&, int64_t, const at::Tensor&, const std::vector<at::Tensor>&) {
      return LevelPick::Choice{};
    });
  };
  auto mapped = [](const LevelPick& inner, const at::Tensor& table) {
    return LevelPick::Of(
        inner.width(),
        [](const Mapped& p, int64_t level, const at::Tensor& logits, const std::vector<at::Tensor>& carry) {
          return std::get<0>(p)(level, logits.index_select(1, std::get<1>(p)), carry);
        },
        Mapped{inner, table});
  };
  const at::Tensor a = at::arange(4), b = at::arange(4);
  EXPECT_EQ(mapped(level(2), a).key(), mapped(level(2), a).key());
  EXPECT_NE(mapped(level(2), a).key(), mapped(level(2), b).key());  // equal values, another tensor
  EXPECT_NE(mapped(level(2), a).key(), mapped(level(3), a).key());  // the inner pick's width
  EXPECT_NE(level(2).key(), level(3).key());
  EXPECT_FALSE(LevelPick{}.defined());
}

}  // namespace
}  // namespace speclab
