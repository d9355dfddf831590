#include "framework/core/options.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "framework/tokenizers/unicode.h"

namespace speclab {
namespace {

std::string Describe(const YAML::Node& value) {
  switch (value.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return absl::StrCat("'", value.Scalar(), "'");
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "nothing";
  }
}

std::optional<int64_t> ParseInt(const YAML::Node& v) {
  int64_t out;
  if (v.IsScalar() && absl::SimpleAtoi(v.Scalar(), &out)) return out;
  return std::nullopt;
}

std::optional<double> ParseDouble(const YAML::Node& v) {
  double out;
  if (v.IsScalar() && absl::SimpleAtod(v.Scalar(), &out)) return out;
  return std::nullopt;
}

std::optional<bool> ParseBool(const YAML::Node& v) {
  if (!v.IsScalar()) return std::nullopt;
  const std::string& s = v.Scalar();
  if (s == "true" || s == "True" || s == "yes") return true;
  if (s == "false" || s == "False" || s == "no") return false;
  return std::nullopt;
}

// yaml-cpp keeps both entries of a key given twice in one mapping and reads
// the first: a later value would be ignored without a word. Refuse it.
absl::Status CheckNoDuplicateKeys(const YAML::Node& node, const std::string& file, const std::string& path) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      if (auto ok = CheckNoDuplicateKeys(node[i], file, absl::StrCat(path, "[", i, "]")); !ok.ok()) return ok;
    return absl::OkStatus();
  }
  if (!node.IsMap()) return absl::OkStatus();
  std::set<std::string> seen;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar())
      return absl::InvalidArgumentError(absl::StrCat(file, ":", entry.first.Mark().line + 1, ": a key under '",
                                                     path.empty() ? "the top level" : path, "' is ",
                                                     Describe(entry.first), ", expected a name"));
    const std::string key = entry.first.Scalar();
    const std::string where = path.empty() ? key : absl::StrCat(path, ".", key);
    if (!seen.insert(key).second)
      return absl::InvalidArgumentError(absl::StrCat(file, ":", entry.first.Mark().line + 1, ": key '", where,
                                                     "' is given twice in one mapping (only one value can hold)"));
    if (auto ok = CheckNoDuplicateKeys(entry.second, file, where); !ok.ok()) return ok;
  }
  return absl::OkStatus();
}

// YAML is printable UTF-8; yaml-cpp reads other bytes but writes them back as
// text it cannot read again (a resolved config that would not load). `where` starts
// the error, followed by the line when `lines`.
absl::Status CheckUtf8(const std::string& text, const std::string& where, bool lines) {
  int line = 1;
  for (size_t pos = 0; pos < text.size();) {
    if (text[pos] == '\n') ++line;
    char32_t c;
    const size_t at = pos;
    if (!unicode::DecodeUtf8(text, &pos, &c))
      return absl::InvalidArgumentError(absl::StrCat(where, lines ? absl::StrCat(":", line) : "",
                                                     ": not UTF-8 text (byte ", pos + 1, ")"));
    // YAML's printable set: control characters (a NUL, say) are not text.
    const bool printable = c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c <= 0x7E) || c == 0x85 ||
                           (c >= 0xA0 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD) || c >= 0x10000;
    if (!printable)
      return absl::InvalidArgumentError(absl::StrCat(where, lines ? absl::StrCat(":", line) : "",
                                                     absl::StrFormat(": control character U+%04X (byte %d) is not "
                                                                     "YAML text",
                                                                     static_cast<uint32_t>(c), at + 1)));
  }
  return absl::OkStatus();
}

}  // namespace

Options::Options(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)),
      used_(std::make_shared<std::set<std::string>>()) {}

absl::StatusOr<Options> Options::FromString(const std::string& text, const std::string& file) {
  if (absl::Status utf8 = CheckUtf8(text, file, true); !utf8.ok()) return utf8;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ":", e.mark.line + 1, ": invalid YAML: ", e.msg));
  }
  if (!root.IsMap() && !root.IsNull())
    return absl::InvalidArgumentError(absl::StrCat(file, ":1: expected a mapping at the top level"));
  if (absl::Status unique = CheckNoDuplicateKeys(root, file, ""); !unique.ok()) return unique;
  return Options(root, file, "");
}

absl::StatusOr<Options> Options::FromFile(const std::string& file) {
  std::ifstream in(file);
  if (!in) return absl::NotFoundError(absl::StrCat(file, ": cannot open config file"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return FromString(buffer.str(), file);
}

absl::Status SetAtPath(YAML::Node& root, const std::string& key_path, const YAML::Node& value,
                       const std::string& what) {
  auto bad = [&](const std::string& message) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", message));
  };
  if (key_path.empty()) return bad("expected KEY.PATH");
  // Walk with fresh handles: yaml-cpp nodes alias, so reassigning one would
  // overwrite the parent's content instead of descending.
  std::vector<YAML::Node> chain{root};
  const std::vector<std::string> segments = absl::StrSplit(key_path, '.');
  for (size_t s = 0; s < segments.size(); ++s) {
    std::string key = segments[s];
    std::optional<size_t> index;  // "methods[2]": the third item of the list `methods`
    if (const size_t open = key.find('['); open != std::string::npos) {
      size_t i = 0;
      if (key.back() != ']' || !absl::SimpleAtoi(key.substr(open + 1, key.size() - open - 2), &i))
        return bad(absl::StrCat("'", key, "': expected NAME or NAME[INDEX]"));
      index = i;
      key = key.substr(0, open);
    }
    if (key.empty()) return bad(absl::StrCat("'", key_path, "' has an empty key"));
    if (!chain.back().IsMap()) return bad(absl::StrCat("'", segments[s - 1], "' is not a mapping"));
    const bool last = s + 1 == segments.size();
    if (index) {
      YAML::Node list = chain.back()[key];
      if (!list.IsSequence() || *index >= list.size())
        return bad(absl::StrCat("'", key, "' has no item ", *index,
                                list.IsSequence() ? absl::StrCat(" (it has ", list.size(), ")") : " (not a list)"));
      if (last) {
        list[*index] = value;
        return absl::OkStatus();
      }
      chain.push_back(list[*index]);
      continue;
    }
    if (last) {
      chain.back()[key] = value;
      return absl::OkStatus();
    }
    YAML::Node next = chain.back()[key];
    if (!next.IsDefined() || next.IsNull()) {
      chain.back()[key] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[key];
    }
    chain.push_back(next);
  }
  return absl::OkStatus();
}

absl::StatusOr<Options> Options::FromFileWithOverrides(const std::string& file,
                                                      const std::vector<std::string>& overrides) {
  auto options = FromFile(file);
  if (!options.ok()) return options.status();
  YAML::Node root = options->node_;
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  for (const std::string& item : overrides) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return absl::InvalidArgumentError(absl::StrCat("--set '", item, "': expected KEY.PATH=VALUE"));
    if (absl::Status utf8 = CheckUtf8(item, "--set", false); !utf8.ok()) return utf8;
    YAML::Node value;
    try {
      value = YAML::Load(item.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("--set '", item, "': invalid YAML value: ", e.msg));
    }
    if (absl::Status names = CheckNoDuplicateKeys(value, absl::StrCat("--set '", item, "'"), item.substr(0, eq));
        !names.ok())
      return names;
    if (absl::Status set = SetAtPath(root, item.substr(0, eq), value, absl::StrCat("--set '", item, "'")); !set.ok())
      return set;
  }
  return Options(root, file, "");
}

std::string Options::KeyPath(const std::string& key) const {
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

absl::Status Options::Error(const std::string& key, const std::string& message) const {
  int line = node_.Mark().line + 1;
  if (node_.IsMap() && node_[key]) line = node_[key].Mark().line + 1;
  return absl::InvalidArgumentError(
      absl::StrCat(file_, ":", std::max(line, 1), ": key '", KeyPath(key), "': ", message));
}

absl::Status Options::TypeError(const std::string& key, const YAML::Node& value,
                                const std::string& expected) const {
  return Error(key, absl::StrCat("expected ", expected, ", got ", Describe(value)));
}

bool Options::Has(const std::string& key) const { return node_.IsMap() && node_[key]; }

absl::StatusOr<YAML::Node> Options::Lookup(const std::string& key, bool required) {
  used_->insert(key);
  if (node_.IsMap()) {
    YAML::Node value = node_[key];
    if (value) return value;
  }
  if (required) return Error(key, "missing required key");
  return YAML::Node(YAML::NodeType::Undefined);
}

#define SPECLAB_SCALAR_GETTER(Name, Type, Parse, expected)                               \
  absl::StatusOr<Type> Options::Name(const std::string& key, std::optional<Type> fallback) { \
    auto value = Lookup(key, !fallback.has_value());                                   \
    if (!value.ok()) return value.status();                                            \
    if (!value->IsDefined()) return *fallback;                                         \
    auto parsed = Parse(*value);                                                       \
    if (!parsed) return TypeError(key, *value, expected);                              \
    return *parsed;                                                                    \
  }

SPECLAB_SCALAR_GETTER(GetInt, int64_t, ParseInt, "an integer")
SPECLAB_SCALAR_GETTER(GetDouble, double, ParseDouble, "a number")
SPECLAB_SCALAR_GETTER(GetBool, bool, ParseBool, "true or false")
#undef SPECLAB_SCALAR_GETTER

absl::StatusOr<std::string> Options::GetString(const std::string& key, std::optional<std::string> fallback) {
  auto value = Lookup(key, !fallback.has_value());
  if (!value.ok()) return value.status();
  if (!value->IsDefined()) return *fallback;
  if (!value->IsScalar()) return TypeError(key, *value, "a string");
  return value->Scalar();
}

template <typename T, typename Parse>
static absl::StatusOr<std::vector<T>> ParseList(const YAML::Node& value, Parse parse) {
  std::vector<T> out;
  for (const auto& item : value) {
    auto parsed = parse(item);
    if (!parsed) return absl::InvalidArgumentError(Describe(item));
    out.push_back(*parsed);
  }
  return out;
}

#define SPECLAB_LIST_GETTER(Name, Type, Parse, expected)                                      \
  absl::StatusOr<std::vector<Type>> Options::Name(const std::string& key,                       \
                                                  std::optional<std::vector<Type>> fallback) {  \
    auto value = Lookup(key, !fallback.has_value());                                            \
    if (!value.ok()) return value.status();                                                     \
    if (!value->IsDefined()) return *fallback;                                                  \
    if (!value->IsSequence()) return TypeError(key, *value, "a list of " expected);              \
    auto list = ParseList<Type>(*value, Parse);                                                 \
    if (!list.ok())                                                                             \
      return Error(key, absl::StrCat("expected a list of " expected ", found the item ",        \
                                     list.status().message()));                                 \
    return list;                                                                                \
  }

SPECLAB_LIST_GETTER(GetDoubleList, double, ParseDouble, "numbers")
SPECLAB_LIST_GETTER(GetIntList, int64_t, ParseInt, "integers")
SPECLAB_LIST_GETTER(GetStringList, std::string,
                    [](const YAML::Node& n) -> std::optional<std::string> {
                      if (!n.IsScalar()) return std::nullopt;
                      return n.Scalar();
                    },
                    "strings")
#undef SPECLAB_LIST_GETTER

absl::StatusOr<int64_t> Options::GetIntIn(const std::string& key, std::optional<int64_t> fallback, int64_t lo,
                                           int64_t hi) {
  auto value = GetInt(key, fallback);
  if (!value.ok()) return value.status();
  if (*value < lo || *value > hi) return Error(key, absl::StrCat("expected an integer in [", lo, ", ", hi, "]"));
  return *value;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> Options::GetIntListList(const std::string& key) {
  auto value = Lookup(key, /*required=*/true);
  if (!value.ok()) return value.status();
  if (!value->IsSequence()) return TypeError(key, *value, "a list of integer lists");
  std::vector<std::vector<int64_t>> out;
  for (const auto& item : *value) {
    if (!item.IsSequence()) return TypeError(key, item, "a list of integer lists");
    auto list = ParseList<int64_t>(item, ParseInt);
    if (!list.ok())
      return Error(key, absl::StrCat("expected integers, found the item ", list.status().message()));
    out.push_back(*std::move(list));
  }
  return out;
}

absl::StatusOr<Options> Options::GetMap(const std::string& key) {
  auto value = Lookup(key, /*required=*/false);
  if (!value.ok()) return value.status();
  if (!value->IsDefined() || value->IsNull())
    return Options(YAML::Node(YAML::NodeType::Map), file_, KeyPath(key));
  if (!value->IsMap()) return TypeError(key, *value, "a mapping");
  return Options(*value, file_, KeyPath(key));
}

absl::StatusOr<std::vector<Options>> Options::GetMapList(const std::string& key) {
  auto value = Lookup(key, /*required=*/true);
  if (!value.ok()) return value.status();
  if (!value->IsSequence()) return TypeError(key, *value, "a list of mappings");
  std::vector<Options> out;
  for (size_t i = 0; i < value->size(); ++i) {
    YAML::Node item = (*value)[i];
    if (!item.IsMap()) return TypeError(key, item, "a list of mappings");
    out.emplace_back(item, file_, absl::StrCat(KeyPath(key), "[", i, "]"));
  }
  return out;
}

absl::Status Options::CheckAllUsed() const {
  if (!node_.IsMap()) return absl::OkStatus();
  for (const auto& entry : node_) {
    // Keys are names (FromString refuses others; a node built in code may not).
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : Describe(entry.first);
    if (!used_->count(key)) {
      std::string known;
      for (const auto& k : *used_) absl::StrAppend(&known, known.empty() ? "" : ", ", k);
      return absl::InvalidArgumentError(absl::StrCat(
          file_, ":", entry.first.Mark().line + 1, ": unknown key '", KeyPath(key),
          "' (expected one of: ", known.empty() ? "no keys" : known, ")"));
    }
  }
  return absl::OkStatus();
}

std::string Options::ResolvePath(const std::string& relative) const {
  std::filesystem::path p(relative);
  if (p.is_absolute() || file_.empty()) return relative;
  // Paths in configs are relative to the working directory (the repo root)
  // when they exist there, else to the config file's folder.
  if (std::filesystem::exists(p)) return relative;
  return (std::filesystem::path(file_).parent_path() / p).string();
}

std::string Options::Dump() const {
  YAML::Emitter out;
  out << node_;
  return out.c_str();
}

}  // namespace speclab
