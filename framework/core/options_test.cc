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

TEST(OptionsTest, IntegersInARangeNameTheKeyAndTheRange) {
  auto root = Options::FromString("a: 3\nb: 9\n", "range.yaml");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(*root->GetIntIn("a", std::nullopt, 1, 3), 3);
  EXPECT_EQ(*root->GetIntIn("absent", 5, 1, 8), 5);
  const absl::Status outside = root->GetIntIn("b", std::nullopt, 1, 8).status();
  EXPECT_THAT(std::string(outside.message()), HasSubstr("range.yaml"));
  EXPECT_THAT(std::string(outside.message()), HasSubstr("'b'"));
  EXPECT_THAT(std::string(outside.message()), HasSubstr("expected an integer in [1, 8]"));
  EXPECT_FALSE(root->GetIntIn("absent", 0, 1, 8).ok());  // a fallback outside is refused too
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

TEST(OptionsTest, PathsReachListItemsByIndex) {
  auto root = Options::FromString("methods:\n  - {name: a, policy: {gamma: 2}}\n  - {name: b}\nx: 1\n", "m.yaml");
  ASSERT_TRUE(root.ok());
  YAML::Node node = root->node();
  ASSERT_TRUE(SetAtPath(node, "methods[0].policy.gamma", YAML::Load("8"), "test").ok());
  ASSERT_TRUE(SetAtPath(node, "methods[1].policy.gamma", YAML::Load("4"), "test").ok());
  ASSERT_TRUE(SetAtPath(node, "methods[1].name", YAML::Load("c"), "test").ok());
  EXPECT_EQ(node["methods"][0]["policy"]["gamma"].as<int>(), 8);
  EXPECT_EQ(node["methods"][1]["policy"]["gamma"].as<int>(), 4);
  EXPECT_EQ(node["methods"][1]["name"].as<std::string>(), "c");
  EXPECT_THAT(std::string(SetAtPath(node, "methods[2].name", YAML::Load("d"), "sweep key").message()),
              HasSubstr("sweep key: 'methods' has no item 2 (it has 2)"));
  EXPECT_THAT(std::string(SetAtPath(node, "x[0]", YAML::Load("d"), "k").message()), HasSubstr("(not a list)"));
  EXPECT_THAT(std::string(SetAtPath(node, "x.y", YAML::Load("d"), "k").message()), HasSubstr("'x' is not a mapping"));
  EXPECT_THAT(std::string(SetAtPath(node, "methods[a].name", YAML::Load("d"), "k").message()),
              HasSubstr("expected NAME or NAME[INDEX]"));
}

// Found by tests/fuzz/fuzz_experiment_yaml.cc: yaml-cpp read bytes that are
// not UTF-8, or a NUL, and wrote a resolved config it could not read back.
TEST(OptionsTest, TextThatIsNotUtf8IsRefusedWithItsLine) {
  auto root = Options::FromString("name: a\n\"k\xff\xfe\": 1\n", "bad.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("bad.yaml:2: not UTF-8 text (byte 11)"));
  auto nul = Options::FromString(std::string("name: a\nb: c\0d\n", 14), "nul.yaml");
  ASSERT_FALSE(nul.ok());
  EXPECT_THAT(std::string(nul.status().message()), HasSubstr("nul.yaml:2: control character U+0000 (byte 13)"));
  auto fine = Options::FromString("name: caf\xc3\xa9\n", "ok.yaml");
  ASSERT_TRUE(fine.ok());
  EXPECT_TRUE(Options::FromString(fine->Dump(), "again.yaml").ok());
}

// Found by tests/fuzz/fuzz_experiment_yaml.cc: a mapping used as a key
// (YAML's "? {a: 1}") made CheckAllUsed throw out of the framework.
TEST(OptionsTest, KeysThatAreNotNamesAreRefused) {
  auto root = Options::FromString("decoding:\n  ? {a: 1}\n  : 2\n", "keys.yaml");
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(std::string(root.status().message()),
              HasSubstr("keys.yaml:2: a key under 'decoding' is a mapping, expected a name"));
  EXPECT_FALSE(Options::FromString("[1]: 2\n", "keys.yaml").ok());
}

}  // namespace
}  // namespace speclab
