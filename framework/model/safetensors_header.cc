#include "framework/model/safetensors_header.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/json.h"
#include "framework/core/status_macros.h"

namespace speclab {

const std::vector<SafetensorsDtype>& SafetensorsDtypes() {
  static const std::vector<SafetensorsDtype> dtypes = {{"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}};
  return dtypes;
}

namespace {

// Bounded so that numel * element size cannot overflow.
constexpr uint64_t kMaxElements = uint64_t{1} << 48;

std::string SupportedDtypes() {
  std::vector<std::string> names;
  for (const SafetensorsDtype& d : SafetensorsDtypes()) names.push_back(d.name);
  return absl::StrJoin(names, ", ");
}

// 0 for a dtype speclab does not read.
int ElementBytes(const std::string& name) {
  for (const SafetensorsDtype& d : SafetensorsDtypes())
    if (name == d.name) return d.bytes;
  return 0;
}

absl::StatusOr<uint64_t> ParseUint(const JsonValue& node, const std::string& what, const std::string& where) {
  int64_t value;
  if (node.GetInt64(&value) && value >= 0) return static_cast<uint64_t>(value);
  return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: ", what, " must be a non-negative integer"));
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name, const JsonValue& info, uint64_t data_size,
                                 const std::string& path) {
  const std::string where = absl::StrCat(path, ": tensor '", name, "'");
  if (!info.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: expected an object"));
  std::set<std::string> keys;
  for (const auto& [key, value] : info.object()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: unknown key '", key,
                                                     "' (expected dtype, shape and data_offsets)"));
    if (!keys.insert(key).second)
      return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: key '", key, "' appears twice"));
  }
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!keys.count(key)) return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: missing ", key));
  SafetensorsEntry e;
  e.name = name;
  const JsonValue* dtype = info.Find("dtype");
  if (!dtype->is_string()) return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: dtype must be a string"));
  const int element_bytes = ElementBytes(dtype->string_value());
  if (element_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": unsupported dtype '", dtype->string_value(),
                                                   "' (supported: ", SupportedDtypes(), ")"));
  }
  e.dtype = dtype->string_value();
  const JsonValue* shape = info.Find("shape");
  if (!shape->is_array()) return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: shape must be a list"));
  uint64_t numel = 1;
  for (const JsonValue& dim : shape->array()) {
    ASSIGN_OR_RETURN(uint64_t d, ParseUint(dim, "shape", where));
    // Bounded so numel * element size cannot overflow.
    if (d > kMaxElements || (numel *= d) > kMaxElements) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: shape too big"));
    }
    e.shape.push_back(static_cast<int64_t>(d));
  }
  const JsonValue* offsets = info.Find("data_offsets");
  if (!offsets->is_array() || offsets->array().size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: data_offsets must be [begin, end]"));
  }
  ASSIGN_OR_RETURN(e.begin, ParseUint(offsets->array()[0], "data_offsets", where));
  ASSIGN_OR_RETURN(e.end, ParseUint(offsets->array()[1], "data_offsets", where));
  if (e.begin > e.end || e.end > data_size) {
    return absl::OutOfRangeError(absl::StrCat(where, ": data_offsets [", e.begin, ", ", e.end,
                                              "] out of range (data region holds ", data_size,
                                              " bytes; file truncated?)"));
  }
  const uint64_t expected = numel * static_cast<uint64_t>(element_bytes);
  if (e.end - e.begin != expected) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": bad header: data_offsets span ", e.end - e.begin,
                                                   " bytes, shape and dtype need ", expected));
  }
  return e;
}

// Tensors must not share bytes: an overlap means a corrupted or hand-edited
// header whose tensors would silently alias each other's data.
absl::Status CheckNoOverlaps(std::vector<const SafetensorsEntry*> entries, const std::string& path) {
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  // Sorted by start, two ranges overlap only if some neighbours do.
  for (size_t i = 1; i < entries.size(); ++i) {
    const SafetensorsEntry& before = *entries[i - 1];
    const SafetensorsEntry& after = *entries[i];
    if (after.begin < before.end) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad header: tensors '", before.name, "' [", before.begin,
                                                     ", ", before.end, ") and '", after.name, "' [", after.begin,
                                                     ", ", after.end, ") overlap"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<SafetensorsEntry>> ParseSafetensorsHeader(std::string_view text, uint64_t data_size,
                                                                     const std::string& path) {
  // Errors read "PATH: bad header: line:1:12: malformed JSON at key 'w.shape': ...".
  auto root = ParseJson(text, "line");
  if (!root.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": bad header: ", root.status().message()));
  if (!root->is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": bad header: expected a JSON object"));
  std::vector<SafetensorsEntry> entries;
  std::set<std::string> names;
  for (const auto& [name, info] : root->object()) {
    if (!names.insert(name).second)
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad header: tensor '", name, "' appears twice"));
    if (name == "__metadata__") continue;
    ASSIGN_OR_RETURN(SafetensorsEntry e, ParseEntry(name, info, data_size, path));
    entries.push_back(std::move(e));
  }
  std::vector<const SafetensorsEntry*> nonempty;
  for (const SafetensorsEntry& e : entries)
    if (e.end > e.begin) nonempty.push_back(&e);
  RETURN_IF_ERROR(CheckNoOverlaps(std::move(nonempty), path));
  return entries;
}

}  // namespace speclab
