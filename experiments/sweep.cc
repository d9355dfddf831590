#include "experiments/sweep.h"

#include <cstdint>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace speclab {
namespace {

// One assignment of a cell: a key path and its value.
using Assignment = std::pair<std::string, YAML::Node>;
// One axis of the product: its choices, each a set of assignments.
using Dimension = std::vector<std::vector<Assignment>>;

std::string FlowText(const YAML::Node& value) {
  YAML::Emitter out;
  out << YAML::Flow << value;
  return out.c_str();
}

uint64_t Fnv1a64(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

// "methods[0].length_policy.gamma" -> "gamma".
std::string ShortKey(const std::string& key) {
  std::string last = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
  return last.substr(0, last.find('['));
}

std::string SafeName(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '+' || c == '-';
    out += safe ? c : '_';
  }
  return out;
}

absl::Status SweepError(const Options& root, const std::string& key, const std::string& message) {
  return root.Error("sweep", absl::StrCat(key.empty() ? "" : absl::StrCat("'", key, "': "), message));
}

absl::StatusOr<std::vector<Dimension>> ReadDimensions(const Options& root) {
  const YAML::Node sweep = root.node()["sweep"];
  if (!sweep.IsMap()) return SweepError(root, "", "expected a mapping with grid: and/or zip:");
  std::vector<Dimension> dimensions;
  for (const auto& part : sweep) {
    const std::string kind = part.first.Scalar();
    if (kind != "grid" && kind != "zip")
      return SweepError(root, kind, "unknown key (expected grid: every combination, zip: lists walked together)");
    if (!part.second.IsMap() || part.second.size() == 0)
      return SweepError(root, kind, "expected a mapping of KEY.PATH: [values]");
    Dimension zip;
    for (const auto& entry : part.second) {
      const std::string key = entry.first.Scalar();
      const YAML::Node& values = entry.second;
      if (!values.IsSequence() || values.size() == 0)
        return SweepError(root, absl::StrCat(kind, ".", key), "expected a non-empty list of values");
      if (kind == "grid") {
        Dimension& axis = dimensions.emplace_back();
        for (const YAML::Node& value : values) axis.push_back({{key, value}});
        continue;
      }
      if (!zip.empty() && zip.size() != values.size())
        return SweepError(root, absl::StrCat("zip.", key),
                          absl::StrCat("has ", values.size(), " values, the zip's first list ", zip.size(),
                                       " (zipped lists are walked together)"));
      zip.resize(values.size());
      for (size_t i = 0; i < values.size(); ++i) zip[i].push_back({key, values[i]});
    }
    if (!zip.empty()) dimensions.push_back(std::move(zip));
  }
  if (dimensions.empty()) return SweepError(root, "", "expected grid: or zip:");
  return dimensions;
}

}  // namespace

std::string SweepCell::FolderName() const { return absl::StrCat(name, "-", hash.substr(0, 8)); }

absl::StatusOr<std::vector<SweepCell>> ExpandSweep(const Options& root) {
  auto dimensions = ReadDimensions(root);
  if (!dimensions.ok()) return dimensions.status();
  size_t total = 1;
  for (const Dimension& d : *dimensions) {
    total *= d.size();
    if (total > 100000) return SweepError(root, "", "more than 100000 cells");
  }
  std::vector<SweepCell> cells;
  std::map<std::string, std::string> name_of_hash;
  std::vector<size_t> choice(dimensions->size(), 0);
  for (size_t n = 0; n < total; ++n) {
    // Mixed-radix count: the last dimension varies fastest.
    size_t rest = n;
    for (size_t d = dimensions->size(); d-- > 0;) {
      choice[d] = rest % (*dimensions)[d].size();
      rest /= (*dimensions)[d].size();
    }
    YAML::Node node = YAML::Clone(root.node());
    node.remove("sweep");
    SweepCell cell{.config = Options(YAML::Node(), root.file(), "")};
    std::vector<std::string> parts;
    for (size_t d = 0; d < dimensions->size(); ++d) {
      for (const auto& [key, value] : (*dimensions)[d][choice[d]]) {
        if (absl::Status set = SetAtPath(node, key, YAML::Clone(value), absl::StrCat(root.file(), ": sweep key '", key,
                                                                                      "'"));
            !set.ok())
          return set;
        cell.values.push_back({key, FlowText(value)});
        parts.push_back(absl::StrCat(SafeName(ShortKey(key)), "=", SafeName(FlowText(value))));
      }
    }
    cell.config = Options(node, root.file(), "");
    cell.name = absl::StrJoin(parts, ",");
    if (cell.name.size() > 120) cell.name = cell.name.substr(0, 120);  // the hash tells cells apart
    cell.hash = absl::StrFormat("%016x", Fnv1a64(cell.config.Dump()));
    auto [it, fresh] = name_of_hash.emplace(cell.hash, cell.name);
    if (!fresh)
      return SweepError(root, "", absl::StrCat("cells ", it->second, " and ", cell.name, " are the same config"));
    cells.push_back(std::move(cell));
  }
  return cells;
}

}  // namespace speclab
