// FirstFloatWhere: the first float from which a monotone host rule holds.
#include "framework/device/device_length_stop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace speclab {
namespace {

TEST(FirstFloatWhere, IsTheSmallestFloatWhereTheRuleHolds) {
  // 0.7 is no float: the largest below it is float(0.7), the rule's first the one after.
  const float rounded = 0.7f;
  ASSERT_LT(static_cast<double>(rounded), 0.7);
  EXPECT_EQ(FirstFloatWhere([](double x) { return x > 0.7; }),
            static_cast<double>(std::nextafter(rounded, 1.0f)));
  EXPECT_EQ(FirstFloatWhere([](double x) { return x >= 0.5; }), 0.5);
  EXPECT_EQ(FirstFloatWhere([](double) { return true; }), 0.0);
  EXPECT_EQ(FirstFloatWhere([](double x) { return std::isinf(x); }), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(FirstFloatWhere([](double) { return false; })));
  // Subnormals are floats too.
  const double tiny = static_cast<double>(std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(FirstFloatWhere([](double x) { return x > 0; }), tiny);
}

}  // namespace
}  // namespace speclab
