// The plugin loader's refusals, each naming the file (the out-of-tree example,
// built and loaded by scripts/sdk_check.sh, is the accepted case).
#include "framework/plugin_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "framework/core/verifier_registry.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;

TEST(PluginLoaderTest, MissingFileIsNamed) {
  const absl::Status status = LoadPlugin("/nonexistent/libnothing.so");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/libnothing.so: no such file"));
}

TEST(PluginLoaderTest, ALibraryWithoutSpeclabPluginIsRefused) {
  const absl::Status status = LoadPlugin(SPECLAB_LIBRARY_PATH);  // libspeclab itself: no SPECLAB_PLUGIN()
  EXPECT_THAT(status.message(), HasSubstr("not a speclab plugin"));
}

TEST(PluginLoaderTest, AnotherVersionIsRefused) {
  const absl::Status status = LoadPlugin(SPECLAB_WRONG_VERSION_PLUGIN);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("built against speclab 0.0.1, LibTorch 0.1"));
  EXPECT_THAT(status.message(), HasSubstr("rebuild it"));
}

TEST(PluginLoaderTest, ANameAlreadyRegisteredIsRefusedAndTheBuiltInKept) {
  const absl::Status status = LoadPlugin(SPECLAB_DUPLICATE_NAME_PLUGIN);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(), HasSubstr("registers 'rejection', already registered"));
  const auto* entry = VerifierRegistry::Find("rejection");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->lossless, "lossless");  // the built-in, not the clash
}

}  // namespace
}  // namespace speclab
