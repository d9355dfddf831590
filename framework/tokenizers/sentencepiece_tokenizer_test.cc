// SentencePieceTokenizer against libsentencepiece's own tools.
//
// speclab ports sentencepiece 0.1.97's encoder instead of linking it, so
// these tests check it id for id against `spm_encode` / `spm_decode`:
//   - always: tests/fixtures/sentencepiece/reference_ids.txt, spm_encode's
//     ids of every line of reference_text.txt (scripts/
//     sentencepiece_reference.sh writes them);
//   - when spm_encode is on PATH: a 200 KB sample of data/corpus/valid.txt
//     (git-ignored: skipped when absent), malformed UTF-8, decoding of odd id
//     sequences, and small unigram/BPE/word/char models that spm_train
//     trains on the spot (nmt_nfkc and nfkc_cf charsmaps, user-defined and
//     control symbols, byte fallback on and off, whitespace as suffix).
#include "framework/tokenizers/sentencepiece_tokenizer.h"
#include "framework/core/file_util.h"

#include <unistd.h>

#include <ctime>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kSpace = "\xe2\x96\x81";  // "▁"

std::string SourcePath(const std::string& relative) {
  return absl::StrCat(SPECLAB_SOURCE_DIR, "/", relative);
}

std::string ModelPath() { return SourcePath("data/tokenizer/speclab.model"); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

std::string TempDir(const std::string& name) {
  static int counter = 0;
  const fs::path dir = fs::path(::testing::TempDir()) /
                       absl::StrCat("speclab_spm_", ::getpid(), "_", counter++, "_", name);
  RemoveTree((dir).string());
  fs::create_directories(dir);
  return dir.string();
}

// The lines of `text` as std::getline (and so spm_encode) reads them.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

std::vector<int32_t> ParseIds(const std::string& line) {
  std::vector<int32_t> ids;
  std::istringstream in(line);
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

bool OnPath(const std::string& tool) {
  return std::system(absl::StrCat("command -v ", tool, " >/dev/null 2>&1").c_str()) == 0;
}

// Runs `command`; fails the test if it fails.
void RunCommand(const std::string& command) {
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

// spm_encode's ids of every line of `text`.
std::vector<std::vector<int32_t>> SpmEncode(const std::string& model, const std::string& text,
                                            const std::string& dir) {
  const std::string in = dir + "/spm_in.txt";
  const std::string out = dir + "/spm_out.txt";
  WriteFile(in, text);
  RunCommand(absl::StrCat("spm_encode --model=", model, " --output_format=id --input=", in,
                   " --output=", out));
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& line : Lines(ReadFile(out))) ids.push_back(ParseIds(line));
  return ids;
}

// spm_decode's output for the id sequences: each one's text and a newline
// (a text may hold newlines itself).
std::string SpmDecode(const std::string& model,
                                   const std::vector<std::vector<int32_t>>& sequences,
                                   const std::string& dir) {
  std::string input;
  for (const auto& ids : sequences) absl::StrAppend(&input, absl::StrJoin(ids, " "), "\n");
  const std::string in = dir + "/spm_ids.txt";
  const std::string out = dir + "/spm_text.txt";
  WriteFile(in, input);
  RunCommand(absl::StrCat("spm_decode --model=", model, " --input_format=id --input=", in,
                   " --output=", out));
  return ReadFile(out);
}

// Decodes the id sequences as SpmDecode does and checks the outputs agree,
// naming the first sequence that does not.
void ExpectDecodesLikeSpmDecode(const SentencePieceTokenizer& tokenizer,
                                const std::vector<std::vector<int32_t>>& sequences,
                                const std::string& expected) {
  std::string ours;
  for (const auto& ids : sequences) {
    auto text = tokenizer.Decode(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    const size_t at = ours.size();
    absl::StrAppend(&ours, *text, "\n");
    if (expected.compare(at, ours.size() - at, ours, at, ours.size() - at) != 0) {
      FAIL() << "ids " << absl::StrJoin(ids, " ") << " decode to '" << *text
             << "', spm_decode's output there: '" << expected.substr(at, ours.size() - at)
             << "'";
    }
  }
  EXPECT_EQ(ours, expected);
}

// Lines that exercise the normalizer and the unknown/byte paths, malformed
// UTF-8 included.
std::string EdgeText() {
  const std::vector<std::string> lines = {
      "\xef\xac\x81ne \xef\xac\x82ow \xe2\x91\xa0 \xef\xbc\xa8\xef\xbd\x85\xef\xbd\x8c\xef\xbd\x8c"
      "\xef\xbd\x8f\xe3\x80\x80\xef\xbc\xb7 \xef\xbd\xb6\xef\xbe\x80 \xe3\x8d\xbb \xe2\x84\x8c \xc2\xbd",
      "   many    spaces   around   ",
      "<|x|>def<|x|> define undefined <|x|x|> <|x| def",
      kSpace + kSpace + " " + kSpace + " leading block " + kSpace + kSpace,
      "\xc3\x85NGSTR\xc3\x96M Stra\xc3\x9f" "e \xc4\xb0stanbul \xce\xa3\xce\x8a\xce\xa3",
      "tabs\tand\xc2\xa0nbsp\xe3\x80\x80ideographic",
      "<c1> control text <s> </s> <unk> <pad> <0x41>",
      "\xe2\x80\x8b\xe2\x80\x8c\xe2\x80\x8d\xef\xbb\xbf zero widths",
      "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xe4\xb8\xad\xe6\x96\x87",
      "",
      " ",
      "x",
      "bad \xff\xfe bytes \xc3 trunc \xe2\x82 x",
      "\xed\xa0\x80 surrogate \xc0\xaf overlong \xf8\x88\x80\x80\x80 five",
      "literal \xef\xbf\xbd replacement",
      std::string("nul \0 inside", 12),
      "end \xe4",
  };
  return absl::StrCat(absl::StrJoin(lines, "\n"), "\n");
}

class SentencePieceTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = SentencePieceTokenizer::Load(ModelPath());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = loaded->release();
    auto newline = tokenizer_->Encode("\n");
    ASSERT_TRUE(newline.ok());
    ASSERT_EQ(newline->size(), 1u);
    newline_id_ = (*newline)[0];
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }

  std::vector<int32_t> Encode(const std::string& text) {
    auto ids = tokenizer_->Encode(text);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>();
  }

  // What spm_encode gives `text` line by line, with the newline token after
  // each line, as one sequence.
  std::vector<int32_t> JoinLines(const std::vector<std::vector<int32_t>>& lines,
                                 bool final_newline) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < lines.size(); ++i) {
      ids.insert(ids.end(), lines[i].begin(), lines[i].end());
      if (i + 1 < lines.size() || final_newline) ids.push_back(newline_id_);
    }
    return ids;
  }

  static SentencePieceTokenizer* tokenizer_;
  static int32_t newline_id_;
};

SentencePieceTokenizer* SentencePieceTokenizerTest::tokenizer_ = nullptr;
int32_t SentencePieceTokenizerTest::newline_id_ = -1;

TEST_F(SentencePieceTokenizerTest, ShippedModelIds) {
  EXPECT_EQ(tokenizer_->vocab_size(), 8000);
  EXPECT_EQ(tokenizer_->unk_id(), 0);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  EXPECT_EQ(tokenizer_->pad_id(), 3);
  EXPECT_EQ(*tokenizer_->IdToPiece(0), "<unk>");
  EXPECT_EQ(*tokenizer_->IdToPiece(3), "<pad>");
  EXPECT_EQ(*tokenizer_->IdToPiece(newline_id_), "<0x0A>");
  EXPECT_EQ(tokenizer_->path(), ModelPath());
  EXPECT_FALSE(tokenizer_->IdToPiece(8000).ok());
}

TEST_F(SentencePieceTokenizerTest, MatchesSpmEncodeOnTheReferenceText) {
  const std::string text = ReadFile(SourcePath("tests/fixtures/sentencepiece/reference_text.txt"));
  const std::vector<std::string> lines = Lines(text);
  const std::vector<std::string> expected =
      Lines(ReadFile(SourcePath("tests/fixtures/sentencepiece/reference_ids.txt")));
  ASSERT_GE(lines.size(), 200u);
  ASSERT_EQ(lines.size(), expected.size())
      << "re-run scripts/sentencepiece_reference.sh after editing reference_text.txt";
  size_t tokens = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("line ", i + 1, ": '", lines[i], "'"));
    const std::vector<int32_t> ids = Encode(lines[i]);
    EXPECT_EQ(ids, ParseIds(expected[i]));
    tokens += ids.size();
    // Decode gives the text back, except that a literal "▁" decodes to " "
    // (as upstream's does).
    EXPECT_EQ(*tokenizer_->Decode(ids), absl::StrReplaceAll(lines[i], {{kSpace, " "}}));
  }
  std::cout << "[ spm ref  ] " << lines.size() << " lines, " << text.size() << " bytes, "
            << tokens << " tokens equal spm_encode's\n";
}

TEST_F(SentencePieceTokenizerTest, MultiLineTextIsItsLinesJoinedByTheNewlineByte) {
  // spm_encode works a line at a time. In speclab.model "\n" is no piece's
  // character (byte fallback gives it <0x0A>), add_dummy_prefix and
  // remove_extra_whitespaces are off: so nothing merges across a newline and
  // a text encodes as its lines' ids joined by <0x0A>.
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    ASSERT_EQ(tokenizer_->IdToPiece(id)->find('\n'), std::string::npos) << id;
  }
  const std::vector<int32_t> a = Encode("a");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(*tokenizer_->IdToPiece(a[0]), "a");  // no dummy "▁" prefix
  EXPECT_EQ(*tokenizer_->Decode(Encode("  a  ")), "  a  ");  // spaces kept

  EXPECT_EQ(Encode("a\nb"), JoinLines({Encode("a"), Encode("b")}, false));
  EXPECT_EQ(Encode("\n\n"), std::vector<int32_t>({newline_id_, newline_id_}));
  EXPECT_EQ(Encode("    x = 1\n    y = 2\n"),
            JoinLines({Encode("    x = 1"), Encode("    y = 2")}, true));

  const std::string text = ReadFile(SourcePath("tests/fixtures/sentencepiece/reference_text.txt"));
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& line :
       Lines(ReadFile(SourcePath("tests/fixtures/sentencepiece/reference_ids.txt")))) {
    expected.push_back(ParseIds(line));
  }
  const std::vector<int32_t> ids = Encode(text);
  EXPECT_EQ(ids, JoinLines(expected, true));
  EXPECT_EQ(*tokenizer_->Decode(ids), absl::StrReplaceAll(text, {{kSpace, " "}}));
}

TEST_F(SentencePieceTokenizerTest, CorpusSampleMatchesSpmEncode) {
  const std::string corpus = SourcePath("data/corpus/valid.txt");
  if (!fs::exists(corpus)) GTEST_SKIP() << corpus << " is absent (scripts/build_corpus.sh)";
  if (!OnPath("spm_encode")) GTEST_SKIP() << "spm_encode is not on PATH";
  std::string sample = ReadFile(corpus).substr(0, 200 * 1024);
  sample.resize(sample.rfind('\n') + 1);
  const std::string dir = TempDir("corpus");
  const std::vector<std::vector<int32_t>> reference = SpmEncode(ModelPath(), sample, dir);
  const std::vector<std::string> lines = Lines(sample);
  ASSERT_EQ(reference.size(), lines.size());

  const std::clock_t start = std::clock();
  const std::vector<int32_t> ids = Encode(sample);
  const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  const std::vector<int32_t> expected = JoinLines(reference, true);
  if (ids != expected) {
    for (size_t i = 0; i < lines.size(); ++i) {
      ASSERT_EQ(Encode(lines[i]), reference[i]) << "line " << i + 1 << ": " << lines[i];
    }
    FAIL() << "the lines match but the whole text does not";
  }
  EXPECT_EQ(*tokenizer_->Decode(ids), absl::StrReplaceAll(sample, {{kSpace, " "}}));
  std::cout << "[ spm ref  ] " << lines.size() << " lines, " << sample.size() << " bytes, "
            << ids.size() << " tokens equal spm_encode's; encoded at "
            << sample.size() / seconds / 1e6 << " MB/s (CPU time)\n";
}

TEST_F(SentencePieceTokenizerTest, MalformedUtf8AndOddIdsMatchSpmEncodeAndDecode) {
  if (!OnPath("spm_encode") || !OnPath("spm_decode")) {
    GTEST_SKIP() << "spm_encode/spm_decode are not on PATH";
  }
  const std::string dir = TempDir("edge");
  const std::string text = EdgeText();
  const std::vector<std::string> lines = Lines(text);
  const std::vector<std::vector<int32_t>> reference = SpmEncode(ModelPath(), text, dir);
  ASSERT_EQ(reference.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(Encode(lines[i]), reference[i]) << "line " << i + 1 << ": " << lines[i];
  }

  // Byte pieces that are no valid UTF-8 (U+FFFD each), split sequences,
  // control and unknown ids, "▁" at the start.
  auto id = [](const std::string& piece) {
    auto ids = tokenizer_->Encode(piece);
    return ids.ok() && ids->size() == 1 ? (*ids)[0] : -1;
  };
  const int32_t b0x = 4;  // <0x00>
  const int32_t space = id(kSpace);
  const int32_t the = id(kSpace + "the");
  ASSERT_GE(space, 0);
  ASSERT_GE(the, 0);
  const std::vector<std::vector<int32_t>> sequences = {
      {b0x + 0xE4, b0x + 0xB8, b0x + 0xAD},           // 中
      {b0x + 0xE4, b0x + 0xB8},                        // truncated
      {b0x + 0xE4, the, b0x + 0xB8, b0x + 0xAD},       // split by a piece
      {b0x + 0xFF, b0x + 0x80, b0x + 0xC0, b0x + 0xAF, b0x + 0x41},
      {b0x + 0xED, b0x + 0xA0, b0x + 0x80},            // a surrogate
      {1, the, 0, space, 2, 3},
      {1, space, the},
      {0, 0, the, 0},
      {b0x + 0x0A, the, b0x + 0x20, space},
      {},
  };
  ExpectDecodesLikeSpmDecode(*tokenizer_, sequences, SpmDecode(ModelPath(), sequences, dir));
}

TEST_F(SentencePieceTokenizerTest, EncodesMegabytesPerSecond) {
  std::string text;
  const std::string reference =
      ReadFile(SourcePath("tests/fixtures/sentencepiece/reference_text.txt"));
  while (text.size() < 4 * 1024 * 1024) text += reference;
  // CPU time: the machine may be busy with other work.
  const std::clock_t start = std::clock();
  const std::vector<int32_t> ids = Encode(text);
  const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  std::cout << "[ spm speed] " << text.size() << " bytes -> " << ids.size() << " ids in "
            << seconds << " s CPU: " << text.size() / seconds / 1e6 << " MB/s\n";
  EXPECT_FALSE(ids.empty());
}

// --- Small models that spm_train trains here --------------------------------

struct TrainedModel {
  const char* name;
  const char* flags;
};

class SentencePieceTrainedModelTest : public ::testing::TestWithParam<TrainedModel> {};

TEST_P(SentencePieceTrainedModelTest, MatchesSpmEncodeAndDecode) {
  if (!OnPath("spm_train") || !OnPath("spm_encode") || !OnPath("spm_decode")) {
    GTEST_SKIP() << "spm_train/spm_encode/spm_decode are not on PATH";
  }
  const TrainedModel& param = GetParam();
  const std::string dir = TempDir(param.name);
  // Trained on the reference text (and a corpus sample when there is one),
  // checked on the reference text and the edge cases.
  const std::string reference_text =
      ReadFile(SourcePath("tests/fixtures/sentencepiece/reference_text.txt"));
  const std::string text = reference_text + EdgeText();
  std::string training = reference_text;
  const std::string corpus = SourcePath("data/corpus/valid.txt");
  if (fs::exists(corpus)) {
    std::string sample = ReadFile(corpus).substr(0, 300 * 1024);
    training += sample.substr(0, sample.rfind('\n') + 1);
  }
  WriteFile(dir + "/train.txt", training);
  RunCommand(absl::StrCat("spm_train --input=", dir, "/train.txt --model_prefix=", dir,
                   "/m --minloglevel=2 --hard_vocab_limit=false ", param.flags,
                   " >", dir, "/train.log 2>&1"));
  const std::string model = dir + "/m.model";
  auto loaded = SentencePieceTokenizer::Load(model);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const SentencePieceTokenizer& tokenizer = **loaded;

  const std::vector<std::string> lines = Lines(text);
  const std::vector<std::vector<int32_t>> reference = SpmEncode(model, text, dir);
  ASSERT_EQ(reference.size(), lines.size());
  std::vector<std::vector<int32_t>> ours;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto ids = tokenizer.Encode(lines[i]);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, reference[i]) << "line " << i + 1 << ": " << lines[i];
    ours.push_back(*ids);
  }
  // Decoding: the encoded lines, then every id once in a few mixed runs.
  std::vector<std::vector<int32_t>> sequences = ours;
  for (int32_t start = 0; start < tokenizer.vocab_size(); start += 7) {
    std::vector<int32_t> ids;
    for (int32_t id = start; id < std::min(start + 7, tokenizer.vocab_size()); ++id) {
      ids.push_back(id);
    }
    sequences.push_back(ids);
  }
  ExpectDecodesLikeSpmDecode(tokenizer, sequences, SpmDecode(model, sequences, dir));
}

INSTANTIATE_TEST_SUITE_P(
    Models, SentencePieceTrainedModelTest,
    ::testing::Values(
        // nmt_nfkc, add_dummy_prefix, remove_extra_whitespaces (the defaults).
        TrainedModel{"unigram", "--vocab_size=300 --user_defined_symbols='<|x|>,def' "
                                "--control_symbols='<c1>'"},
        TrainedModel{"bpe", "--model_type=bpe --vocab_size=300 "
                            "--user_defined_symbols='<|x|>,def,\xe2\x96\x81\xe2\x96\x81'"},
        TrainedModel{"unigram_bytes", "--vocab_size=600 --byte_fallback=true "
                                      "--normalization_rule_name=nfkc_cf "
                                      "--treat_whitespace_as_suffix=true"},
        TrainedModel{"bpe_bytes_identity",
                     "--model_type=bpe --vocab_size=600 --byte_fallback=true "
                     "--normalization_rule_name=identity --add_dummy_prefix=false "
                     "--remove_extra_whitespaces=false --allow_whitespace_only_pieces=true "
                     "--split_digits=true"},
        TrainedModel{"word", "--model_type=word --vocab_size=200"},
        TrainedModel{"char", "--model_type=char --vocab_size=60 --normalization_rule_name=nfkc "
                             "--user_defined_symbols=def"}),
    [](const ::testing::TestParamInfo<TrainedModel>& info) { return info.param.name; });

// --- Errors ----------------------------------------------------------------

// Protobuf wire format: a length-delimited field, merged into the model when
// appended to it.
std::string Field(int number, const std::string& payload) {
  std::string out;
  auto varint = [&out](uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  };
  varint((static_cast<uint64_t>(number) << 3) | 2);
  varint(payload.size());
  return out + payload;
}

absl::Status LoadStatus(const std::string& path) {
  return SentencePieceTokenizer::Load(path).status();
}

TEST(SentencePieceTokenizerErrorsTest, MissingFileIsNotFound) {
  const std::string path = TempDir("missing") + "/none.model";
  const absl::Status status = LoadStatus(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(path));
}

TEST(SentencePieceTokenizerErrorsTest, GarbageEmptyAndTruncatedFilesAreNotModels) {
  const std::string dir = TempDir("garbage");
  const std::string model = ReadFile(ModelPath());
  const std::vector<std::pair<std::string, std::string>> files = {
      {"garbage.model", "this is not a protobuf"},
      {"empty.model", ""},
      {"truncated.model", model.substr(0, model.size() / 2 + 1)},
      {"head.model", model.substr(0, 100)},
  };
  for (const auto& [name, contents] : files) {
    SCOPED_TRACE(name);
    const std::string path = dir + "/" + name;
    WriteFile(path, contents);
    const absl::Status status = LoadStatus(path);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_THAT(status.message(), HasSubstr("not a SentencePiece model"));
  }
  // A folder is no model either.
  EXPECT_EQ(LoadStatus(dir).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SentencePieceTokenizerErrorsTest, BrokenOrUnsupportedNormalizersAreRefused) {
  const std::string dir = TempDir("normalizer");
  const std::string model = ReadFile(ModelPath());

  // normalizer_spec { name: "nmt_nfkc" precompiled_charsmap: "abc" }
  const std::string broken = dir + "/broken_charsmap.model";
  WriteFile(broken, model + Field(3, Field(1, "nmt_nfkc") + Field(2, "abc")));
  absl::Status status = LoadStatus(broken);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(broken));
  EXPECT_THAT(status.message(), HasSubstr("nmt_nfkc"));
  EXPECT_THAT(status.message(), HasSubstr("precompiled_charsmap"));

  // denormalizer_spec { name: "rules" precompiled_charsmap: ... }
  const std::string denormalizer = dir + "/denormalizer.model";
  WriteFile(denormalizer, model + Field(5, Field(1, "rules") + Field(2, "0123456789abcdef")));
  status = LoadStatus(denormalizer);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(status.message(), HasSubstr(denormalizer));
  EXPECT_THAT(status.message(), HasSubstr("denormalizer"));
}

TEST(SentencePieceTokenizerErrorsTest, InconsistentModelsAreRefused) {
  const std::string dir = TempDir("inconsistent");
  const std::string model = ReadFile(ModelPath());
  // trainer_spec { byte_fallback: false } with the 256 byte pieces.
  const std::string no_fallback = dir + "/no_fallback.model";
  WriteFile(no_fallback, model + Field(2, std::string("\x98\x02\x00", 3)));
  absl::Status status = LoadStatus(no_fallback);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(no_fallback));
  EXPECT_THAT(status.message(), HasSubstr("byte_fallback"));

  // A second piece "<unk>" (pieces { piece: "<unk>" type: UNKNOWN }).
  const std::string twice = dir + "/twice.model";
  WriteFile(twice, model + Field(1, Field(1, "<unk>") + std::string("\x18\x02", 2)));
  status = LoadStatus(twice);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr(twice));
}

}  // namespace
}  // namespace speclab
