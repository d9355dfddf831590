#include "framework/tokenizers/tokenizer.h"
#include "framework/core/file_util.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "framework/tokenizers/sentencepiece_tokenizer.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string& ModelPath() {
  static const std::string* path =
      new std::string(std::string(SPECLAB_SOURCE_DIR) + "/data/tokenizer/speclab.model");
  return *path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string TempDir(const std::string& name) {
  static int counter = 0;
  const fs::path dir = fs::path(::testing::TempDir()) /
                       absl::StrCat("speclab_tokenizer_", ::getpid(), "_", counter++, "_", name);
  RemoveTree((dir).string());
  fs::create_directories(dir);
  return dir.string();
}

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = LoadTokenizer(ModelPath());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }

  static void ExpectRoundTrip(const std::string& text) {
    auto ids = tokenizer_->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    auto decoded = tokenizer_->Decode(*ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, text);
  }

  static Tokenizer* tokenizer_;
};

Tokenizer* TokenizerTest::tokenizer_ = nullptr;

TEST_F(TokenizerTest, ShippedModelHasTheDocumentedIds) {
  EXPECT_EQ(tokenizer_->vocab_size(), 8000);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  auto* spm = dynamic_cast<SentencePieceTokenizer*>(tokenizer_);
  ASSERT_NE(spm, nullptr);
  EXPECT_EQ(spm->unk_id(), 0);
  EXPECT_EQ(spm->pad_id(), 3);
  EXPECT_EQ(*spm->IdToPiece(1), "<s>");
  EXPECT_EQ(*spm->IdToPiece(2), "</s>");
}

TEST_F(TokenizerTest, RoundTripsCodeWithIndentationNewlinesAndUnicode) {
  ExpectRoundTrip(
      "class Stack:\n"
      "    \"\"\"A LIFO stack.\"\"\"\n"
      "\n"
      "    def push(self, item):\n"
      "        if item is None:\n"
      "            raise ValueError('no None, \u00e9t\u00e9 \u4e2d\u6587 \U0001F600')\n"
      "        self._items.append(item)  # trailing spaces   \n"
      "\n"
      "\n"
      "\tdef tabbed(self):\n"
      "\t\treturn {'k': [1, 2, 3.25e-10]}\n");
  ExpectRoundTrip("  leading spaces, double  inner  spaces, trailing  ");
  ExpectRoundTrip("\n\n\nonly newlines\n\n");
  ExpectRoundTrip("\u0391\u03b8\u03ae\u03bd\u03b1 \u2014 \u00abquoted\u00bb \u2026 \u05e9\u05dc\u05d5\u05dd");
  ExpectRoundTrip("windows\r\nline\r\nends and a \x7f control and \x01 byte");
  ExpectRoundTrip("");
}

TEST_F(TokenizerTest, RoundTripsRepositoryFiles) {
  // Real Python code with indentation, and the JSON prompt sets.
  for (const char* file : {"scripts/build_prompts.py", "data/prompts/code.jsonl",
                           "data/prompts/prose.jsonl", "data/prompts/structured.jsonl",
                           "data/prompts/copy.jsonl"}) {
    SCOPED_TRACE(file);
    const std::string text = ReadFile(absl::StrCat(SPECLAB_SOURCE_DIR, "/", file));
    ASSERT_FALSE(text.empty());
    ExpectRoundTrip(text);
  }
}

TEST_F(TokenizerTest, NewlinesAndIndentationAreCheap) {
  auto newline = tokenizer_->Encode("\n");
  ASSERT_TRUE(newline.ok());
  EXPECT_EQ(newline->size(), 1u);
  for (const char* indent : {"    ", "        "}) {
    auto ids = tokenizer_->Encode(indent);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids->size(), 1u) << "indent of " << std::string(indent).size();
  }
  auto line = tokenizer_->Encode("        return self._items.pop()\n");
  ASSERT_TRUE(line.ok());
  EXPECT_LE(line->size(), 12u);
}

TEST_F(TokenizerTest, EncodeAddsNoControlTokensAndDecodeDropsThem) {
  auto ids = tokenizer_->Encode("In the beginning");
  ASSERT_TRUE(ids.ok());
  ASSERT_FALSE(ids->empty());
  for (int32_t id : *ids) {
    EXPECT_NE(id, tokenizer_->bos_id());
    EXPECT_NE(id, tokenizer_->eos_id());
  }
  std::vector<int32_t> framed = {tokenizer_->bos_id()};
  framed.insert(framed.end(), ids->begin(), ids->end());
  framed.push_back(tokenizer_->eos_id());
  EXPECT_EQ(*tokenizer_->Decode(framed), "In the beginning");
  auto empty = tokenizer_->Encode("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(TokenizerTest, DecodeRejectsIdsOutsideTheVocabulary) {
  for (int32_t bad : {-1, 8000, 1 << 30}) {
    std::vector<int32_t> ids = {5, bad};
    auto decoded = tokenizer_->Decode(ids);
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(decoded.status().message(), HasSubstr(absl::StrCat(bad)));
    EXPECT_THAT(decoded.status().message(), HasSubstr("speclab.model"));
  }
}

TEST(LoadTokenizerTest, MissingFileIsNotFoundAndNamesThePath) {
  const std::string missing = TempDir("missing") + "/no_such_tokenizer.model";
  auto loaded = LoadTokenizer(missing);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr(missing));
}

TEST(LoadTokenizerTest, LoadsAFolderHoldingTokenizerModel) {
  const std::string dir = TempDir("folder");
  fs::copy_file(ModelPath(), fs::path(dir) / "tokenizer.model");
  auto from_folder = LoadTokenizer(dir);
  ASSERT_TRUE(from_folder.ok()) << from_folder.status();
  auto from_file = LoadTokenizer(ModelPath());
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  const std::string text = "def main():\n    print('hi')\n";
  EXPECT_EQ(*(*from_folder)->Encode(text), *(*from_file)->Encode(text));
  EXPECT_EQ((*from_folder)->vocab_size(), 8000);
}

TEST(LoadTokenizerTest, FolderWithoutTokenizerIsNotFound) {
  const std::string dir = TempDir("empty_folder");
  auto loaded = LoadTokenizer(dir);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr(dir));
  EXPECT_THAT(loaded.status().message(), HasSubstr("tokenizer.model"));
}

TEST(LoadTokenizerTest, CorruptModelIsAnErrorNamingTheFile) {
  const std::string file = TempDir("corrupt") + "/broken.model";
  std::ofstream(file) << "this is not a protobuf";
  auto loaded = LoadTokenizer(file);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr(file));
}

TEST(LoadTokenizerTest, BadOrUnknownFormatsAreClearErrors) {
  const std::string dir = TempDir("formats");
  const std::string json = dir + "/tokenizer.json";
  std::ofstream(json) << "{}";  // dispatched to the tokenizer.json loader
  auto hf = LoadTokenizer(json);
  ASSERT_FALSE(hf.ok());
  EXPECT_THAT(hf.status().message(), HasSubstr(json));

  const std::string other = dir + "/vocab.txt";
  std::ofstream(other) << "a\nb\n";
  auto unknown = LoadTokenizer(other);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr(other));

  auto empty = LoadTokenizer("");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace speclab
