// A small strict JSON (RFC 8259) parser into an immutable tree.
//
// Written for HuggingFace tokenizer.json files (10+ MB, 100k-entry objects):
// yaml-cpp rejects the surrogate-pair escapes ("\ud83d\ude00") that such
// files may hold and takes seconds on them. Errors name the source, the line
// and column, and the key path being parsed ("model.merges[12]").
#ifndef SPECLAB_FRAMEWORK_CORE_JSON_H_
#define SPECLAB_FRAMEWORK_CORE_JSON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Member = std::pair<std::string, JsonValue>;

  JsonValue() = default;
  JsonValue(JsonValue&&) = default;
  JsonValue& operator=(JsonValue&&) = default;

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Accessors for the matching type (checked with assert in debug builds).
  bool bool_value() const { return bool_; }
  double number_value() const { return number_; }
  // True (and sets *out) if the number is an integer that fits in int64.
  bool GetInt64(int64_t* out) const;
  const std::string& string_value() const { return string_; }
  const std::vector<JsonValue>& array() const { return *array_; }
  // Members in file order; duplicate keys are kept.
  const std::vector<Member>& object() const { return *object_; }

  // The first member named `key` of an object, or nullptr (also for non-objects).
  const JsonValue* Find(std::string_view key) const;

  // "null", "a boolean", "a number", "a string", "an array", "an object".
  static const char* TypeName(Type type);

 private:
  friend class JsonParser;

  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::unique_ptr<std::vector<JsonValue>> array_;
  std::unique_ptr<std::vector<Member>> object_;
};

// Parses `text`; `source` (usually the file name) starts every error message.
// Errors are InvalidArgument: "SOURCE:LINE:COLUMN: malformed JSON at key
// 'model.vocab': ...".
absl::StatusOr<JsonValue> ParseJson(std::string_view text, std::string_view source);

// `text` escaped for the inside of a JSON string (quotes, backslashes and
// control characters; UTF-8 passes through).
std::string JsonEscape(std::string_view text);

// Reads and parses the file at `path` (NotFound if it cannot be opened).
absl::StatusOr<JsonValue> ReadJsonFile(const std::string& path);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_JSON_H_
