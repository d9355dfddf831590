#include "framework/error_text.h"

#include <c10/util/Exception.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>

namespace speclab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ErrorTextTest, LibTorchErrorsWithoutTheirStackTrace) {
  try {
    TORCH_CHECK(false, "the rows must be float32");
  } catch (const std::exception& e) {
    EXPECT_THAT(ErrorText(e), HasSubstr("the rows must be float32"));
    EXPECT_THAT(ErrorText(e), Not(HasSubstr("Exception raised from")));
  }
  EXPECT_EQ(ErrorText(std::runtime_error("plain")), "plain");
}

}  // namespace
}  // namespace speclab
