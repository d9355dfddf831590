#include "framework/tokenizers/bpe_tokenizer.h"
#include "framework/core/file_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "framework/core/json.h"
#include "framework/tokenizers/tokenizer.h"
#include "framework/tokenizers/unicode.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string FixtureDir(const std::string& name = "") {
  std::string dir = std::string(SPECLAB_SOURCE_DIR) + "/tests/fixtures/tokenizers";
  return name.empty() ? dir : dir + "/" + name;
}

bool Exists(const std::string& path) {
  std::error_code error;
  return fs::exists(path, error);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Lines split on "\n" only (a "\r" before it stays), without the empty
// string after a final "\n": as scripts/tokenizer_reference.py splits them.
std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

std::vector<int32_t> ParseIds(const std::string& line) {
  std::vector<int32_t> ids;
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    ids.push_back(std::stoi(std::string(field)));
  }
  return ids;
}

std::string TempDir(const std::string& name) {
  static int counter = 0;
  const fs::path dir = fs::path(::testing::TempDir()) /
                       absl::StrCat("speclab_bpe_", ::getpid(), "_", counter++, "_", name);
  RemoveTree((dir).string());
  fs::create_directories(dir);
  return dir.string();
}

std::unique_ptr<BpeTokenizer> MustLoad(const std::string& path) {
  auto loaded = BpeTokenizer::Load(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? std::move(*loaded) : nullptr;
}

std::vector<int32_t> MustEncode(const BpeTokenizer& tokenizer, const std::string& text) {
  auto ids = tokenizer.Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

// ---------------------------------------------------------------- JSON

TEST(BpeJsonTest, ParsesEscapesIncludingSurrogatePairsAndSlash) {
  auto value = ParseJson(
      R"({"a": "\ud83d\ude00", "b": "x\/y", "c": "\u00e9\t\n\r\b\f\"\\", "d": "é中😀",
          "e": [1e3, -2.5, 0, true, false, null], "f": {}})",
      "test.json");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->Find("a")->string_value(), "\xF0\x9F\x98\x80");
  EXPECT_EQ(value->Find("b")->string_value(), "x/y");
  EXPECT_EQ(value->Find("c")->string_value(), "\xC3\xA9\t\n\r\b\f\"\\");
  EXPECT_EQ(value->Find("d")->string_value(), "é中😀");
  const auto& e = value->Find("e")->array();
  ASSERT_EQ(e.size(), 6u);
  int64_t one;
  EXPECT_TRUE(e[0].GetInt64(&one));
  EXPECT_EQ(one, 1000);
  EXPECT_EQ(e[1].number_value(), -2.5);
  EXPECT_FALSE(e[1].GetInt64(&one));
  EXPECT_TRUE(e[3].bool_value());
  EXPECT_FALSE(e[4].bool_value());
  EXPECT_TRUE(e[5].is_null());
  EXPECT_TRUE(value->Find("f")->object().empty());
  EXPECT_EQ(value->Find("missing"), nullptr);
}

TEST(BpeJsonTest, ErrorsNameTheSourceLineAndKeyPath) {
  auto value = ParseJson("{\"model\": {\n  \"vocab\": {\"a\": 0,, \"b\": 1}}}", "tok.json");
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(value.status().message(), HasSubstr("tok.json:2:"));
  EXPECT_THAT(value.status().message(), HasSubstr("'model.vocab'"));

  auto in_array = ParseJson(R"({"model": {"merges": ["a b", "c d" "e f"]}})", "tok.json");
  ASSERT_FALSE(in_array.ok());
  EXPECT_THAT(in_array.status().message(), HasSubstr("'model.merges[1]'"));
}

TEST(BpeJsonTest, IsStrict) {
  for (const char* bad : {
           R"({"a": "\ud83d"})",      // lone high surrogate
           R"({"a": "\ude00"})",      // lone low surrogate
           "{\"a\": \"tab\there\"}",  // raw control character
           R"({"a": "\x41"})",        // not a JSON escape
           R"({"a": 1,})",            // trailing comma
           R"({"a": 01})",            // leading zero
           R"({"a": 1} extra)",       // trailing text
           R"({'a': 1})",             // single quotes
           "{\"a\": \"\xC3\x28\"}",   // invalid UTF-8
           R"({"a": [1, 2)",          // truncated
       }) {
    EXPECT_FALSE(ParseJson(bad, "bad.json").ok()) << bad;
  }
}

// ---------------------------------------------------------------- Unicode

TEST(BpeUnicodeTest, ClassifiesLettersNumbersAndRegexWhitespace) {
  using unicode::CharClass;
  for (char32_t c :
       {U'a', U'Z', U'\u00e9', U'\u4e2d', U'\u05e9', U'\u0645', U'\u3042', U'\u017f'}) {
    EXPECT_EQ(unicode::Classify(c), CharClass::kLetter) << static_cast<uint32_t>(c);
  }
  for (char32_t c :
       {U'0', U'9', U'\u00b2', U'\u00bd', U'\u2160', U'\u0661', U'\uff11', U'\U0001d7ce'}) {
    EXPECT_EQ(unicode::Classify(c), CharClass::kNumber) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', U'\v', U'\f', U'\u0085', U'\u00a0', U'\u1680',
                     U'\u2009', U'\u2028', U'\u2029', U'\u3000'}) {
    EXPECT_EQ(unicode::Classify(c), CharClass::kSpace) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U'!', U'\'', U'_', U'\u0301', U'\u200b', U'\ufeff', U'\U0001f600', U'\u0378',
                     U'\ue000', U'\x1c'}) {
    EXPECT_EQ(unicode::Classify(c), CharClass::kOther) << static_cast<uint32_t>(c);
  }
}

TEST(BpeUnicodeTest, NormalizesToNfcAndNfd) {
  auto nfc = [](const std::u32string& s) { return unicode::ToNfc(s); };
  EXPECT_EQ(nfc(U"cafe\u0301"), U"caf\u00e9");
  EXPECT_EQ(nfc(U"A\u030angstro\u0308m"), U"\u00c5ngstr\u00f6m");
  EXPECT_EQ(nfc(U"\u212b"), U"\u00c5");                // singleton
  EXPECT_EQ(nfc(U"\u1112\u1161\u11ab"), U"\ud55c");    // Hangul L V T
  EXPECT_EQ(nfc(U"q\u0307\u0323"), U"q\u0323\u0307");  // canonical order
  EXPECT_EQ(nfc(U"\u1e9b\u0323"), U"\u1e9b\u0323");    // UAX #15 example
  EXPECT_EQ(nfc(U"\u0344"), U"\u0308\u0301");          // excluded composite
  EXPECT_EQ(nfc(U"\u0301a"), U"\u0301a");              // leading mark
  EXPECT_EQ(unicode::ToNfd(U"\u00e9\ud55c"), U"e\u0301\u1112\u1161\u11ab");
  EXPECT_TRUE(unicode::IsNfcQuick(U"plain \u4e2d\u6587 text"));
  EXPECT_FALSE(unicode::IsNfcQuick(U"e\u0301"));
}

TEST(BpeUnicodeTest, Utf8DecodingIsStrictAndLossyDecodingReplaces) {
  EXPECT_EQ(*unicode::Utf8ToUtf32("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"),
            U"a\u00e9\u4e2d\U0001f600");
  for (const char* bad :
       {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE4\xB8", "\x80", "\xFF"}) {
    EXPECT_FALSE(unicode::Utf8ToUtf32(bad).ok()) << bad;
  }
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(unicode::Utf8Lossy("ok"), "ok");
  EXPECT_EQ(unicode::Utf8Lossy("\xE4\xB8"
                               "a"),
            fffd + "a");                                // truncated
  EXPECT_EQ(unicode::Utf8Lossy("\xF0\x9F\x98"), fffd);  // one subpart
  EXPECT_EQ(unicode::Utf8Lossy("\xFF\xFE"), fffd + fffd);
  EXPECT_EQ(unicode::Utf8Lossy("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogate
}

// ---------------------------------------------------------------- Tiny fixtures
//
// tiny_split_nfc: Llama-3's Split regex + ByteLevel, an NFC normalizer,
// ignore_merges, merges as "a b" strings, a file written with \uXXXX escapes
// (surrogate pairs, "\/"). Byte b has id b; merges 0..12 make ids 256..268:
// he ll hell hello Ġw or Ġwor 12 34 123 's ĠĠ ĊĊ; "Ġworld" (269) is reachable
// only through ignore_merges; <s> 270, </s> 271 (special), 😀 272 (not).
//
// tiny_gpt2: ByteLevel(add_prefix_space, use_regex) alone, merges as pairs,
// raw UTF-8 file. Merges make Ġt he Ġthe Ġh Ġhi 's Ġ1 Ġ12 (256..263);
// <|endoftext|> 264 and <mask> 265 (lstrip), both special.

class BpeTinyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    split_ = MustLoad(FixtureDir("tiny_split_nfc")).release();
    gpt2_ = MustLoad(FixtureDir("tiny_gpt2/tokenizer.json")).release();
  }
  static void TearDownTestSuite() {
    delete split_;
    delete gpt2_;
  }
  static BpeTokenizer* split_;
  static BpeTokenizer* gpt2_;
};

BpeTokenizer* BpeTinyTest::split_ = nullptr;
BpeTokenizer* BpeTinyTest::gpt2_ = nullptr;

TEST_F(BpeTinyTest, SplitNfcTokenizerGivesHandComputedIds) {
  ASSERT_NE(split_, nullptr);
  const BpeTokenizer& t = *split_;
  EXPECT_THAT(MustEncode(t, "hello"), ElementsAre(259));
  // " world" is a vocab entry: ignore_merges emits it whole.
  EXPECT_THAT(MustEncode(t, "hello world"), ElementsAre(259, 269));
  // " worlds" is not: Ġ w o r l d s -> Ġw or -> Ġwor l d s.
  EXPECT_THAT(MustEncode(t, "hello worlds"), ElementsAre(259, 262, 'l', 'd', 's'));
  // \p{N}{1,3}: "123" "45", although "3 4" ranks before "12 3".
  EXPECT_THAT(MustEncode(t, "12345"), ElementsAre(265, '4', '5'));
  // (?i:'s|...) splits contractions in either case.
  EXPECT_THAT(MustEncode(t, "it's IT'S"), ElementsAre('i', 't', 266, ' ', 'I', 'T', '\'', 'S'));
  // Special tokens are matched before pre-tokenization.
  EXPECT_THAT(MustEncode(t, "<s>hello</s>"), ElementsAre(270, 259, 271));
  EXPECT_THAT(MustEncode(t, "<s"), ElementsAre('<', 's'));
  // NFC: e + U+0301 -> é (C3 A9); 😀 is an added token.
  EXPECT_THAT(MustEncode(t, "He\u0301llo \U0001f600!"),
              ElementsAre('H', 0xC3, 0xA9, 257, 'o', ' ', 272, '!'));
  // \s*[\r\n]+ takes the spaces up to the last line break; " b" stays apart.
  EXPECT_THAT(MustEncode(t, "a  \n\n b"), ElementsAre('a', 267, 268, ' ', 'b'));
  // \s+(?!\S): the last space of a run goes with the next word.
  EXPECT_THAT(MustEncode(t, "a  \t b"), ElementsAre('a', 267, '\t', ' ', 'b'));
  EXPECT_THAT(MustEncode(t, ""), IsEmpty());
}

TEST_F(BpeTinyTest, Gpt2TokenizerGivesHandComputedIds) {
  ASSERT_NE(gpt2_, nullptr);
  const BpeTokenizer& t = *gpt2_;
  // add_prefix_space: "hi" is encoded as " hi".
  EXPECT_THAT(MustEncode(t, "hi"), ElementsAre(260));
  EXPECT_THAT(MustEncode(t, "hi the"), ElementsAre(260, 258));
  // Case-sensitive contractions and unbounded digit runs: " it" "'s" " 12".
  EXPECT_THAT(MustEncode(t, "it's 12"), ElementsAre(' ', 'i', 't', 261, 263));
  EXPECT_THAT(MustEncode(t, "IT'S"), ElementsAre(' ', 'I', 'T', '\'', 'S'));
  // Each text segment between added tokens gets its own prefix space.
  EXPECT_THAT(MustEncode(t, "hi<|endoftext|>hi"), ElementsAre(260, 264, 260));
  // lstrip: <mask> swallows the space before it.
  EXPECT_THAT(MustEncode(t, "a <mask> b"), ElementsAre(' ', 'a', 265, ' ', 'b'));
  // The ByteLevel decoder keeps the added space, as `tokenizers`' does.
  EXPECT_EQ(*t.Decode(MustEncode(t, "hi the")), " hi the");
}

TEST_F(BpeTinyTest, ReportsIdsAndSpecialTokens) {
  ASSERT_NE(split_, nullptr);
  ASSERT_NE(gpt2_, nullptr);
  EXPECT_EQ(split_->vocab_size(), 273);
  EXPECT_EQ(split_->bos_id(), 270);  // from the TemplateProcessing post_processor
  EXPECT_EQ(split_->eos_id(), 271);  // by name: </s>
  EXPECT_EQ(gpt2_->vocab_size(), 266);
  EXPECT_EQ(gpt2_->bos_id(), -1);
  EXPECT_EQ(gpt2_->eos_id(), 264);  // <|endoftext|>
  EXPECT_EQ(split_->TokenToId("\u0120world"), 269);
  EXPECT_EQ(split_->TokenToId("</s>"), 271);
  EXPECT_EQ(split_->TokenToId("nope"), -1);
  EXPECT_EQ(*split_->IdToToken(262), "\u0120wor");
  EXPECT_TRUE(split_->IsSpecial(270));
  EXPECT_FALSE(split_->IsSpecial(272));
  EXPECT_FALSE(split_->IsSpecial(259));
  EXPECT_FALSE(split_->IdToToken(273).ok());
}

TEST_F(BpeTinyTest, DecodesBytesSkippingSpecialTokensUnlessAsked) {
  ASSERT_NE(split_, nullptr);
  const BpeTokenizer& t = *split_;
  const std::vector<int32_t> ids = {270, 259, 269, 271};
  EXPECT_EQ(*t.Decode(ids), "hello world");
  EXPECT_EQ(*t.DecodeWithSpecialTokens(ids), "<s>hello world</s>");
  EXPECT_EQ(*t.Decode(std::vector<int32_t>{272, '!'}), "\U0001f600!");  // not special: kept
  EXPECT_EQ(*t.Decode(std::vector<int32_t>{0xC3, 0xA9}), "\u00e9");
  EXPECT_EQ(*t.Decode(std::vector<int32_t>{0xC3}), "\xEF\xBF\xBD");  // half a character
  EXPECT_EQ(*t.Decode(std::vector<int32_t>{}), "");
  for (int32_t bad : {-1, 273, 1 << 30}) {
    std::vector<int32_t> with_bad = {259, bad};
    auto decoded = t.Decode(with_bad);
    ASSERT_FALSE(decoded.ok());
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(decoded.status().message(), HasSubstr(absl::StrCat(bad)));
    EXPECT_THAT(decoded.status().message(), HasSubstr("tiny_split_nfc"));
  }
}

TEST_F(BpeTinyTest, RejectsInvalidUtf8) {
  ASSERT_NE(split_, nullptr);
  auto ids = split_->Encode("ok \xC3\x28");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ids.status().message(), HasSubstr("byte 3"));
}

TEST_F(BpeTinyTest, LoadTokenizerDispatchesTokenizerJsonFilesAndFolders) {
  for (const std::string& path :
       {FixtureDir("tiny_gpt2"), FixtureDir("tiny_gpt2/tokenizer.json")}) {
    auto loaded = LoadTokenizer(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_NE(dynamic_cast<BpeTokenizer*>(loaded->get()), nullptr) << path;
    EXPECT_THAT(*(*loaded)->Encode("hi the"), ElementsAre(260, 258));
    EXPECT_EQ((*loaded)->eos_id(), 264);
  }
}

// ---------------------------------------------------------------- Split behaviors

// A tokenizer over the characters a, b, - with merges "- -", "a -", "- b",
// split on the String "-" with the given behavior.
std::string SplitJson(const std::string& behavior, bool invert) {
  return absl::StrCat(
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "-": 2, "--": 3, "a-": 4, "-b": 5},
          "merges": ["- -", "a -", "- b"]},
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": "-"}, "behavior": ")",
      behavior, R"(", "invert": )", invert ? "true" : "false", R"(},
            {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
          "decoder": {"type": "ByteLevel"}})");
}

TEST(BpeSplitTest, BehaviorsMatchTokenizersSemantics) {
  // "a--b": without splitting, "- -" merges first: a -- b.
  const std::map<std::string, std::vector<int32_t>> expected = {
      {"Removed", {0, 1}},                // a b
      {"Isolated", {0, 2, 2, 1}},         // a - - b
      {"Contiguous", {0, 3, 1}},          // a -- b
      {"MergedWithPrevious", {4, 2, 1}},  // a- - b
      {"MergedWithNext", {0, 2, 5}},      // a - -b
  };
  for (const auto& [behavior, ids] : expected) {
    auto tokenizer = BpeTokenizer::FromJson(SplitJson(behavior, false), behavior);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    EXPECT_EQ(*(*tokenizer)->Encode("a--b"), ids) << behavior;
  }
  auto inverted = BpeTokenizer::FromJson(SplitJson("Removed", true), "inverted");
  ASSERT_TRUE(inverted.ok()) << inverted.status();
  EXPECT_THAT(*(*inverted)->Encode("a--b"), ElementsAre(2, 2));  // only the "-"s stay
}

// ---------------------------------------------------------------- Errors

absl::Status LoadError(const std::string& json, std::string* path) {
  *path = TempDir("error") + "/tokenizer.json";
  WriteFile(*path, json);
  auto loaded = BpeTokenizer::Load(*path);
  return loaded.ok() ? absl::OkStatus() : loaded.status();
}

TEST(BpeErrorTest, MissingFileIsNotFound) {
  const std::string missing = TempDir("missing") + "/tokenizer.json";
  auto loaded = BpeTokenizer::Load(missing);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(), HasSubstr(missing));

  const std::string empty_folder = TempDir("empty");
  auto from_folder = BpeTokenizer::Load(empty_folder);
  ASSERT_FALSE(from_folder.ok());
  EXPECT_EQ(from_folder.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(from_folder.status().message(), HasSubstr(empty_folder));
}

TEST(BpeErrorTest, MalformedJsonNamesTheFileAndKey) {
  std::string path;
  absl::Status status =
      LoadError("{\"model\": {\"type\": \"BPE\",\n \"vocab\": {\"a\": 0,}}}", &path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(path + ":2:"));
  EXPECT_THAT(status.message(), HasSubstr("'model.vocab'"));
}

TEST(BpeErrorTest, BadValuesNameTheFileAndKey) {
  const std::string byte_level =
      R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false})";
  const struct {
    std::string json;
    absl::StatusCode code;
    std::string key;
  } cases[] = {
      {"{}", absl::StatusCode::kInvalidArgument, "'model'"},
      {R"({"model": {"type": "WordPiece", "vocab": {}}})", absl::StatusCode::kUnimplemented,
       "'model.type'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})",
       absl::StatusCode::kInvalidArgument, "'model.vocab['a']'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
       absl::StatusCode::kInvalidArgument, "'model.merges[0]'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}})",
       absl::StatusCode::kInvalidArgument, "'model.merges[0]'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "normalizer": {"type": "Lowercase"}, )" +
           byte_level + "}",
       absl::StatusCode::kUnimplemented, "'normalizer.type'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
             {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated"},
             {"type": "ByteLevel"}]}})",
       absl::StatusCode::kUnimplemented, "'pre_tokenizer.pretokenizers[0].pattern.Regex'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Metaspace"}})",
       absl::StatusCode::kUnimplemented, "'pre_tokenizer.type'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
       absl::StatusCode::kUnimplemented, "'pre_tokenizer'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "decoder": {"type": "Metaspace"}, )" +
           byte_level + "}",
       absl::StatusCode::kUnimplemented, "'decoder.type'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "added_tokens": [{"content": "<s>"}], )" +
           byte_level + "}",
       absl::StatusCode::kInvalidArgument, "'added_tokens[0].id'"},
      // Found by tests/fuzz/fuzz_bpe_tokenizer.cc: one id near 2^30 sized
      // the id tables at 32 GB.
      {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1000000000}, "merges": []}, )" + byte_level + "}",
       absl::StatusCode::kInvalidArgument, "ids are sparse: the largest is 1000000000 for 2 tokens"},
  };
  for (const auto& c : cases) {
    std::string path;
    absl::Status status = LoadError(c.json, &path);
    EXPECT_EQ(status.code(), c.code) << c.json << "\n" << status;
    EXPECT_THAT(status.message(), HasSubstr(path)) << c.json;
    EXPECT_THAT(status.message(), HasSubstr(c.key)) << c.json;
  }
}

TEST(BpeErrorTest, TokenizerConfigNamesBosAndEosOrIsAnError) {
  const std::string dir = TempDir("config");
  fs::copy_file(FixtureDir("tiny_gpt2/tokenizer.json"), dir + "/tokenizer.json");
  WriteFile(dir + "/tokenizer_config.json",
            R"({"bos_token": {"content": "<mask>"}, "eos_token": null})");
  auto loaded = BpeTokenizer::Load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->bos_id(), 265);
  EXPECT_EQ((*loaded)->eos_id(), -1);

  WriteFile(dir + "/tokenizer_config.json", R"({"eos_token": "<nope>"})");
  auto bad = BpeTokenizer::Load(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(dir + "/tokenizer_config.json"));
  EXPECT_THAT(bad.status().message(), HasSubstr("'eos_token'"));
}

// ---------------------------------------------------------------- Real tokenizers
//
// Every tests/fixtures/tokenizers/<name>/ with a tokenizer.json is checked
// against the ids HuggingFace `tokenizers` gives for test_text.txt
// (reference_ids.txt, reference_full.txt, by scripts/tokenizer_reference.py).

struct Expected {
  int32_t vocab_size;
  int32_t bos_id;
  int32_t eos_id;
  bool adds_prefix_space;  // ByteLevel(add_prefix_space): no exact round trip
};

const std::map<std::string, Expected>& KnownTokenizers() {
  static const auto* known = new std::map<std::string, Expected>{
      {"llama3", {128256, 128000, 128001, false}},
      {"qwen3", {151669, -1, 151645, false}},
      {"tiny_gpt2", {266, -1, 264, true}},
      {"tiny_split_nfc", {273, 270, 271, false}},
  };
  return *known;
}

class BpeFixtureTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Loads each fixture once; nullptr (and a skip) when its file is absent.
  BpeTokenizer* Tokenizer() {
    static auto* cache = new std::map<std::string, std::unique_ptr<BpeTokenizer>>();
    const std::string dir = FixtureDir(GetParam());
    if (!Exists(dir + "/tokenizer.json")) return nullptr;
    auto& slot = (*cache)[GetParam()];
    if (slot == nullptr) {
      const auto start = std::chrono::steady_clock::now();
      slot = MustLoad(dir);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      std::printf("[ load     ] %s: %.0f ms (%.1f MB)\n", GetParam().c_str(), ms,
                  fs::file_size(dir + "/tokenizer.json") / 1e6);
    }
    return slot.get();
  }
};

#define SKIP_IF_ABSENT(tokenizer)                                                         \
  if ((tokenizer) == nullptr) {                                                           \
    GTEST_SKIP() << FixtureDir(GetParam())                                                \
                 << "/tokenizer.json is absent: run scripts/fetch_tokenizer_fixtures.sh"; \
  }

TEST_P(BpeFixtureTest, MatchesHuggingFaceReferenceIdsLineByLine) {
  BpeTokenizer* tokenizer = Tokenizer();
  SKIP_IF_ABSENT(tokenizer);
  const std::string reference = FixtureDir(GetParam()) + "/reference_ids.txt";
  if (!Exists(reference)) {
    GTEST_SKIP() << reference
                 << " is absent: run scripts/tokenizer_reference.py where `tokenizers` is "
                    "installed";
  }
  const std::vector<std::string> lines = SplitLines(ReadFile(FixtureDir("test_text.txt")));
  const std::vector<std::string> expected = SplitLines(ReadFile(reference));
  ASSERT_EQ(lines.size(), expected.size()) << "regenerate " << reference;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(MustEncode(*tokenizer, lines[i]), ParseIds(expected[i]))
        << "line " << i + 1 << ": " << lines[i];
  }
}

TEST_P(BpeFixtureTest, MatchesHuggingFaceReferenceIdsForTheWholeText) {
  BpeTokenizer* tokenizer = Tokenizer();
  SKIP_IF_ABSENT(tokenizer);
  const std::string reference = FixtureDir(GetParam()) + "/reference_full.txt";
  if (!Exists(reference)) {
    GTEST_SKIP() << reference
                 << " is absent: run scripts/tokenizer_reference.py where `tokenizers` is "
                    "installed";
  }
  EXPECT_EQ(MustEncode(*tokenizer, ReadFile(FixtureDir("test_text.txt"))),
            ParseIds(ReadFile(reference)));
}

TEST_P(BpeFixtureTest, DecodeInvertsEncodeUpToNormalization) {
  BpeTokenizer* tokenizer = Tokenizer();
  SKIP_IF_ABSENT(tokenizer);
  auto known = KnownTokenizers().find(GetParam());
  if (known != KnownTokenizers().end() && known->second.adds_prefix_space) {
    GTEST_SKIP() << GetParam() << " adds a space before every text segment";
  }
  const std::string text = ReadFile(FixtureDir("test_text.txt"));
  std::vector<std::string> texts = SplitLines(text);
  texts.push_back(text);
  for (const std::string& line : texts) {
    const std::vector<int32_t> ids = MustEncode(*tokenizer, line);
    const std::string normalized = *tokenizer->Normalize(line);
    EXPECT_EQ(*tokenizer->DecodeWithSpecialTokens(ids), normalized) << line;
    std::vector<int32_t> plain;
    for (int32_t id : ids) {
      if (!tokenizer->IsSpecial(id)) plain.push_back(id);
    }
    if (plain.size() == ids.size()) {
      EXPECT_EQ(*tokenizer->Decode(ids), normalized) << line;
    } else {
      EXPECT_EQ(*tokenizer->Decode(ids), *tokenizer->DecodeWithSpecialTokens(plain)) << line;
    }
  }
}

TEST_P(BpeFixtureTest, ReportsVocabSizeBosAndEos) {
  BpeTokenizer* tokenizer = Tokenizer();
  SKIP_IF_ABSENT(tokenizer);
  auto it = KnownTokenizers().find(GetParam());
  if (it == KnownTokenizers().end()) GTEST_SKIP() << "no expectations for " << GetParam();
  EXPECT_EQ(tokenizer->vocab_size(), it->second.vocab_size);
  EXPECT_EQ(tokenizer->bos_id(), it->second.bos_id);
  EXPECT_EQ(tokenizer->eos_id(), it->second.eos_id);
}

TEST_P(BpeFixtureTest, EncodesConcurrentlyAndFast) {
  BpeTokenizer* tokenizer = Tokenizer();
  SKIP_IF_ABSENT(tokenizer);
  const std::string unit = ReadFile(FixtureDir("test_text.txt"));
  std::string text;
  while (text.size() < (2u << 20)) text += unit;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = MustEncode(*tokenizer, text);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ encode   ] %s: %.1f MB -> %zu ids in %.0f ms (%.1f MB/s)\n", GetParam().c_str(),
              text.size() / 1e6, ids.size(), ms, text.size() / ms / 1e3);
  std::vector<std::vector<int32_t>> results(4);
  std::vector<std::thread> threads;
  for (auto& result : results) {
    threads.emplace_back([&] { result = MustEncode(*tokenizer, unit); });
  }
  for (std::thread& thread : threads) thread.join();
  const std::vector<int32_t> single = MustEncode(*tokenizer, unit);
  for (const auto& result : results) EXPECT_EQ(result, single);
}

std::vector<std::string> FixtureNames() {
  std::vector<std::string> names;
  for (const auto& [name, expected] : KnownTokenizers()) names.push_back(name);
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(FixtureDir(), error)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && !KnownTokenizers().count(name) &&
        Exists(entry.path().string() + "/tokenizer.json")) {
      names.push_back(name);
    }
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BpeFixtureTest, ::testing::ValuesIn(FixtureNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace speclab
