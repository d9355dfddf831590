#include "framework/core/json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "framework/tokenizers/unicode.h"

namespace speclab {
namespace {

// Abseil here may predate std::string_view support in StrCat.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

bool JsonValue::GetInt64(int64_t* out) const {
  if (type_ != Type::kNumber || !std::isfinite(number_) || std::trunc(number_) != number_ ||
      std::fabs(number_) > 9.007199254740992e15) {
    return false;
  }
  *out = static_cast<int64_t>(number_);
  return true;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (const Member& member : *object_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}

const char* JsonValue::TypeName(Type type) {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "a boolean";
    case Type::kNumber:
      return "a number";
    case Type::kString:
      return "a string";
    case Type::kArray:
      return "an array";
    case Type::kObject:
      return "an object";
  }
  return "?";
}

class JsonParser {
 public:
  JsonParser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  absl::StatusOr<JsonValue> Parse() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // tolerate a UTF-8 BOM
    JsonValue root;
    if (!ParseValue(&root)) return status_;
    SkipSpace();
    if (pos_ != text_.size()) {
      Fail("unexpected text after the top-level value");
      return status_;
    }
    return root;
  }

 private:
  // A step of the key path: an object key or an array index.
  struct PathStep {
    const std::string* key;  // nullptr for an array element
    size_t index;
  };
  static constexpr int kMaxDepth = 512;

  bool Fail(std::string_view message) {
    if (!status_.ok()) return false;
    int line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    std::string path;
    for (const PathStep& step : path_) {
      if (step.key != nullptr) {
        if (!path.empty()) path += '.';
        path += *step.key;
      } else {
        absl::StrAppend(&path, "[", step.index, "]");
      }
    }
    status_ = absl::InvalidArgumentError(
        absl::StrCat(Sv(source_), ":", line, ":", column, ": malformed JSON at ",
                     path.empty() ? std::string("the top level") : absl::StrCat("key '", path, "'"),
                     ": ", Sv(message)));
    return false;
  }

  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
      ++pos_;
    }
  }

  bool Expect(std::string_view literal) {
    if (text_.substr(pos_, literal.size()) != literal) {
      return Fail(absl::StrCat("expected '", Sv(literal), "'"));
    }
    pos_ += literal.size();
    return true;
  }

  bool ParseValue(JsonValue* out) {
    SkipSpace();
    if (pos_ >= text_.size()) return Fail("unexpected end of input, expected a value");
    switch (text_[pos_]) {
      case '{':
        return ParseObject(out);
      case '[':
        return ParseArray(out);
      case '"':
        out->type_ = JsonValue::Type::kString;
        return ParseString(&out->string_);
      case 't':
        out->type_ = JsonValue::Type::kBool;
        out->bool_ = true;
        return Expect("true");
      case 'f':
        out->type_ = JsonValue::Type::kBool;
        return Expect("false");
      case 'n':
        return Expect("null");
      default:
        if (text_[pos_] == '-' || (text_[pos_] >= '0' && text_[pos_] <= '9')) {
          return ParseNumber(out);
        }
        return Fail(absl::StrCat("unexpected character '", Sv(text_.substr(pos_, 1)),
                                 "', expected a value"));
    }
  }

  bool ParseObject(JsonValue* out) {
    if (++depth_ > kMaxDepth) return Fail("nesting too deep");
    ++pos_;  // '{'
    out->type_ = JsonValue::Type::kObject;
    out->object_ = std::make_unique<std::vector<JsonValue::Member>>();
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      --depth_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') {
        return Fail("expected a string key");
      }
      out->object_->emplace_back();
      JsonValue::Member& member = out->object_->back();
      if (!ParseString(&member.first)) return false;
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') {
        return Fail(absl::StrCat("expected ':' after key '", member.first, "'"));
      }
      ++pos_;
      path_.push_back({&member.first, 0});
      if (!ParseValue(&member.second)) return false;
      path_.pop_back();
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        --depth_;
        return true;
      }
      path_.push_back({&member.first, 0});
      return Fail("expected ',' or '}' after the value");
    }
  }

  bool ParseArray(JsonValue* out) {
    if (++depth_ > kMaxDepth) return Fail("nesting too deep");
    ++pos_;  // '['
    out->type_ = JsonValue::Type::kArray;
    out->array_ = std::make_unique<std::vector<JsonValue>>();
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      --depth_;
      return true;
    }
    while (true) {
      path_.push_back({nullptr, out->array_->size()});
      out->array_->emplace_back();
      if (!ParseValue(&out->array_->back())) return false;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        path_.pop_back();
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        path_.pop_back();
        --depth_;
        return true;
      }
      return Fail("expected ',' or ']' after the element");
    }
  }

  int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads the 4 hex digits of a \u escape at pos_ (just after "\u").
  bool ReadHex4(uint32_t* out) {
    if (pos_ + 4 > text_.size()) return Fail("truncated \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const int digit = HexValue(text_[pos_ + i]);
      if (digit < 0) return Fail("\\u escape needs 4 hex digits");
      value = value * 16 + digit;
    }
    pos_ += 4;
    *out = value;
    return true;
  }

  bool ParseString(std::string* out) {
    ++pos_;  // opening quote
    const size_t size = text_.size();
    while (true) {
      // Copy the run of plain characters in one go.
      size_t run = pos_;
      while (run < size) {
        const unsigned char c = static_cast<unsigned char>(text_[run]);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++run;
      }
      out->append(text_.data() + pos_, run - pos_);
      pos_ = run;
      if (pos_ >= size) return Fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20) return Fail("raw control character in a string (must be escaped)");
      if (c >= 0x80) {
        size_t next = pos_;
        char32_t code_point;
        if (!unicode::DecodeUtf8(text_, &next, &code_point)) {
          return Fail("invalid UTF-8 in a string");
        }
        out->append(text_.data() + pos_, next - pos_);
        pos_ = next;
        continue;
      }
      // A backslash escape.
      if (pos_ + 1 >= size) return Fail("unterminated string");
      const char e = text_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case '"':
          out->push_back('"');
          break;
        case '\\':
          out->push_back('\\');
          break;
        case '/':
          out->push_back('/');
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t unit = 0;
          if (!ReadHex4(&unit)) return false;
          if (unit >= 0xDC00 && unit <= 0xDFFF) {
            return Fail("lone low surrogate in a \\u escape");
          }
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            uint32_t low = 0;
            if (text_.substr(pos_, 2) != "\\u") {
              return Fail("high surrogate \\u escape not followed by a low surrogate");
            }
            pos_ += 2;
            if (!ReadHex4(&low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) {
              return Fail("high surrogate \\u escape not followed by a low surrogate");
            }
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
          }
          unicode::AppendUtf8(unit, out);
          break;
        }
        default:
          pos_ -= 1;
          return Fail(absl::StrCat("invalid escape '\\", std::string(1, e), "'"));
      }
    }
  }

  bool ParseNumber(JsonValue* out) {
    const size_t start = pos_;
    const size_t size = text_.size();
    auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < size && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    if (text_[pos_] == '-') ++pos_;
    if (pos_ < size && text_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Fail("malformed number");
    }
    if (pos_ < size && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Fail("malformed number: no digits after '.'");
    }
    if (pos_ < size && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < size && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Fail("malformed number: no digits in the exponent");
    }
    double value = 0;
    const auto result = std::from_chars(text_.data() + start, text_.data() + pos_, value);
    if (result.ec != std::errc() || result.ptr != text_.data() + pos_) {
      pos_ = start;
      return Fail("number out of range");
    }
    out->type_ = JsonValue::Type::kNumber;
    out->number_ = value;
    return true;
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<PathStep> path_;
  absl::Status status_;
};

absl::StatusOr<JsonValue> ParseJson(std::string_view text, std::string_view source) {
  return JsonParser(text, source).Parse();
}

absl::StatusOr<JsonValue> ReadJsonFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  return ParseJson(text, path);
}

std::string JsonEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

}  // namespace speclab
