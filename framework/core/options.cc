#include "framework/core/options.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
    const std::string where = path.empty() ? key : absl::StrCat(path, ".", key);
    if (!seen.insert(key).second)
      return absl::InvalidArgumentError(absl::StrCat(file, ":", entry.first.Mark().line + 1, ": key '", where,
                                                     "' is given twice in one mapping (only one value can hold)"));
    if (auto ok = CheckNoDuplicateKeys(entry.second, file, where); !ok.ok()) return ok;
  }
  return absl::OkStatus();
}

}  // namespace

Options::Options(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)),
      used_(std::make_shared<std::set<std::string>>()) {}

absl::StatusOr<Options> Options::FromString(const std::string& text, const std::string& file) {
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
    const std::vector<std::string> keys = absl::StrSplit(item.substr(0, eq), '.');
    YAML::Node value;
    try {
      value = YAML::Load(item.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("--set '", item, "': invalid YAML value: ", e.msg));
    }
    // Walk with fresh handles: yaml-cpp nodes alias, so reassigning one would
    // overwrite the parent's content instead of descending.
    std::vector<YAML::Node> chain{root};
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      YAML::Node next = chain.back()[keys[i]];
      if (!next.IsDefined() || next.IsNull()) {
        chain.back()[keys[i]] = YAML::Node(YAML::NodeType::Map);
        next = chain.back()[keys[i]];
      }
      if (!next.IsMap())
        return absl::InvalidArgumentError(absl::StrCat("--set '", item, "': '", keys[i], "' is not a mapping"));
      chain.push_back(next);
    }
    chain.back()[keys.back()] = value;
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
    const std::string key = entry.first.as<std::string>();
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
