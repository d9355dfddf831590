#include "framework/core/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace speclab {
namespace {

using ::testing::HasSubstr;

constexpr char kConfig[] =
    "name: demo\n"
    "decoding:\n"
    "  temperatures: [0, 1]\n"
    "  max_new_tokens: lots\n"
    "  typo_key: 3\n";

TEST(OptionsTest, WrongTypeNamesFileLineAndKey) {
  auto root = Options::FromString(kConfig, "exp.yaml");
  ASSERT_TRUE(root.ok());
  auto decoding = root->GetMap("decoding");
  ASSERT_TRUE(decoding.ok());
  auto value = decoding->GetInt("max_new_tokens");
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("exp.yaml:4"));
  EXPECT_THAT(value.status().message(), HasSubstr("decoding.max_new_tokens"));
  EXPECT_THAT(value.status().message(), HasSubstr("expected an integer, got 'lots'"));
}

TEST(OptionsTest, UnknownKeyIsRefusedWithLine) {
  auto root = Options::FromString(kConfig, "exp.yaml");
  ASSERT_TRUE(root.ok());
  auto decoding = root->GetMap("decoding");
  ASSERT_TRUE(decoding->GetDoubleList("temperatures").ok());
  ASSERT_FALSE(decoding->GetInt("max_new_tokens").ok());
  const absl::Status status = decoding->CheckAllUsed();
  EXPECT_THAT(status.message(), HasSubstr("exp.yaml:5: unknown key 'decoding.typo_key'"));
  EXPECT_THAT(status.message(), HasSubstr("temperatures"));
}

TEST(OptionsTest, MissingKeyAndDefaults) {
  auto root = Options::FromString(kConfig, "exp.yaml");
  EXPECT_EQ(*root->GetInt("absent", 7), 7);
  auto missing = root->GetString("required");
  EXPECT_THAT(missing.status().message(), HasSubstr("key 'required': missing required key"));
}

TEST(OptionsTest, InvalidYamlNamesLine) {
  auto root = Options::FromString("a: 1\nb: [1, 2\n", "bad.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("bad.yaml:"));
  EXPECT_THAT(root.status().message(), HasSubstr("invalid YAML"));
}

// A key given twice would keep one value silently: refused, naming the
// line of the second and its full path (nested mappings and lists included).
TEST(OptionsTest, DuplicateKeysAreRefused) {
  EXPECT_THAT(std::string(Options::FromString("a: 1\nb: 2\na: 3\n", "d.yaml").status().message()),
              HasSubstr("d.yaml:3: key 'a' is given twice in one mapping"));
  EXPECT_THAT(std::string(Options::FromString("m:\n  - {x: 1, x: 2}\n", "d.yaml").status().message()),
              HasSubstr("d.yaml:2: key 'm[0].x' is given twice"));
  EXPECT_TRUE(Options::FromString("a: {x: 1}\nb: {x: 1}\n", "d.yaml").ok()) << "one key in two mappings";
}

TEST(OptionsTest, ListItemsAreTypeChecked) {
  auto root = Options::FromString("t: [0, warm]\n", "x.yaml");
  auto list = root->GetDoubleList("t");
  EXPECT_THAT(list.status().message(), HasSubstr("x.yaml:1: key 't': expected a list of numbers, found the item 'warm'"));
}

TEST(OptionsTest, OverridesReplaceNestedValues) {
  const std::string path = ::testing::TempDir() + "/overrides.yaml";
  FILE* f = fopen(path.c_str(), "w");
  fputs(kConfig, f);
  fclose(f);
  auto root = Options::FromFileWithOverrides(path, {"decoding.max_new_tokens=12", "decoding.temperatures=[0.5]",
                                                    "extra.new.key=x"});
  ASSERT_TRUE(root.ok()) << root.status();
  auto decoding = root->GetMap("decoding");
  EXPECT_EQ(*decoding->GetInt("max_new_tokens"), 12);
  EXPECT_EQ(*decoding->GetDoubleList("temperatures"), std::vector<double>{0.5});
  EXPECT_EQ(*root->GetMap("extra")->GetMap("new")->GetString("key"), "x");
  EXPECT_FALSE(Options::FromFileWithOverrides(path, {"novalue"}).ok());
}

}  // namespace
}  // namespace speclab
