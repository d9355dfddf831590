#include "experiments/prompt_set.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace speclab {
namespace {

using ::testing::HasSubstr;

// Writes `text` to a fresh prompt file and returns ReadPromptFile's message.
std::string ErrorOf(const std::string& text) {
  const std::string path = ::testing::TempDir() + "/prompt_set_test_" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream(path) << text;
  auto read = ReadPromptFile(path, 0);
  std::remove(path.c_str());
  return read.ok() ? "ok" : std::string(read.status().message());
}

TEST(PromptSetTest, ReadsStrictJsonLines) {
  const std::string path = ::testing::TempDir() + "/prompt_set_ok_" + std::to_string(::getpid()) + ".jsonl";
  std::ofstream(path) << R"({"id": "a", "task": "code", "prompt": "def f():\n"})" << "\n\n"
                      << R"({"task": "prose", "prompt": "Once \u00e9", "id": "b"})" << "\n"
                      << R"({"id": "c", "task": "code", "prompt": "x"})" << "\n";
  auto all = ReadPromptFile(path, 0);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].text, "def f():\n");
  EXPECT_EQ((*all)[1].text, "Once \xc3\xa9");
  auto first_per_task = ReadPromptFile(path, 1);
  ASSERT_TRUE(first_per_task.ok());
  EXPECT_EQ(first_per_task->size(), 2u);
  std::remove(path.c_str());
}

TEST(PromptSetTest, NonJsonIsRefusedWithItsLine) {
  // YAML's flow map is not JSON: unquoted, it would be read as something else.
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "t", "prompt": "p"})" "\n{id: b, task: t, prompt: p}\n"),
              HasSubstr(".jsonl:2"));
  EXPECT_THAT(ErrorOf("id: a\n"), HasSubstr(":1"));
  EXPECT_THAT(ErrorOf(R"(["a", "t", "p"])"), HasSubstr("expected a JSON object, got an array"));
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "t", "prompt": "p"} trailing)"), HasSubstr(":1"));
}

TEST(PromptSetTest, TypesAndKeysAreChecked) {
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "t", "prompt": 12})"),
              HasSubstr("key 'prompt': expected a string, got a number"));
  EXPECT_THAT(ErrorOf(R"({"id": 7, "task": "t", "prompt": "p"})"), HasSubstr("key 'id': expected a string"));
  EXPECT_THAT(ErrorOf(R"({"id": "a", "prompt": "p"})"), HasSubstr("key 'task' is missing"));
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "t", "prompt": "p", "promt": "q"})"), HasSubstr("unknown key 'promt'"));
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "t", "prompt": "p", "prompt": "q"})"),
              HasSubstr("key 'prompt' appears twice"));
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "t", "prompt": ""})"), HasSubstr("key 'prompt': expected a non-empty"));
}

TEST(PromptSetTest, DuplicateIdsAndReservedTasksAreRefused) {
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "t", "prompt": "p"})" "\n" R"({"id": "a", "task": "u", "prompt": "q"})"),
              HasSubstr(":2: key 'id': 'a' was already used on line 1"));
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "all", "prompt": "p"})"), HasSubstr("reserved"));
  EXPECT_THAT(ErrorOf(R"({"id": "a", "task": "x,y", "prompt": "p"})"), HasSubstr("comma"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("no prompts"));
}

}  // namespace
}  // namespace speclab
