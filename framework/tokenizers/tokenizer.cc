#include "framework/tokenizers/tokenizer.h"

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/tokenizers/bpe_tokenizer.h"
#include "framework/tokenizers/sentencepiece_tokenizer.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;

using LoadFn = absl::StatusOr<std::unique_ptr<Tokenizer>> (*)(const std::string&);

// One tokenizer format: how a file of it is recognised and how it is loaded.
struct TokenizerFormat {
  const char* name;
  const char* extension;    // a file with this extension has this format
  const char* folder_file;  // the file looked for inside a folder
  LoadFn load;              // nullptr: recognised, not supported yet
};

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePiece(
    const std::string& file) {
  ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceTokenizer> tokenizer,
                   SentencePieceTokenizer::Load(file));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHuggingFaceJson(const std::string& file) {
  ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> tokenizer, BpeTokenizer::Load(file));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

// In a folder, the first format (in this order) whose file is there and that
// can be loaded wins.
constexpr TokenizerFormat kFormats[] = {
    {"SentencePiece", ".model", "tokenizer.model", &LoadSentencePiece},
    {"Hugging Face tokenizer.json", ".json", "tokenizer.json", &LoadHuggingFaceJson},
};

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadAs(const TokenizerFormat& format,
                                                  const std::string& file) {
  if (format.load == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        format.name, " tokenizers are not supported yet: '", file, "'"));
  }
  return format.load(file);
}

bool IsFile(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromFolder(const std::string& folder) {
  const TokenizerFormat* unsupported = nullptr;
  std::vector<std::string> looked_for;
  for (const TokenizerFormat& format : kFormats) {
    const fs::path file = fs::path(folder) / format.folder_file;
    looked_for.push_back(format.folder_file);
    if (!IsFile(file)) continue;
    if (format.load == nullptr) {
      if (unsupported == nullptr) unsupported = &format;
      continue;
    }
    return LoadAs(format, file.string());
  }
  if (unsupported != nullptr) {
    return LoadAs(*unsupported, (fs::path(folder) / unsupported->folder_file).string());
  }
  return absl::NotFoundError(absl::StrCat("no tokenizer in folder '", folder,
                                          "': looked for ",
                                          absl::StrJoin(looked_for, ", ")));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("tokenizer path is empty");
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat("tokenizer not found: '", path, "'"));
  }
  if (fs::is_directory(status)) return LoadFromFolder(path);

  const std::string extension = fs::path(path).extension().string();
  std::vector<std::string> known;
  for (const TokenizerFormat& format : kFormats) {
    if (extension == format.extension) return LoadAs(format, path);
    known.push_back(absl::StrCat(format.extension, " (", format.name, ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown tokenizer format of '", path, "': expected a file named *",
      absl::StrJoin(known, ", *"), " or a folder holding one"));
}

}  // namespace speclab
