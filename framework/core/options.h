// Options: typed, located access to one YAML mapping of an experiment config.
//
// Every plugin reads its settings through an Options object. Each getter
// reports errors as "FILE:LINE: key 'a.b.c': expected ..., got ...", and
// CheckAllUsed() refuses keys that nobody read, so a typo never goes unnoticed.
#ifndef SPECLAB_FRAMEWORK_CORE_OPTIONS_H_
#define SPECLAB_FRAMEWORK_CORE_OPTIONS_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace speclab {

class Options {
 public:
  // `node` must be a map (or null, meaning empty). `file` and `path` locate it.
  Options(YAML::Node node, std::string file, std::string path);
  static absl::StatusOr<Options> FromFile(const std::string& file);
  static absl::StatusOr<Options> FromString(const std::string& text, const std::string& file);
  // Loads `file`, then applies command-line overrides "a.b.c=VALUE" (VALUE is
  // parsed as YAML, so lists and numbers work: "decoding.temperatures=[0,1]").
  static absl::StatusOr<Options> FromFileWithOverrides(const std::string& file,
                                                       const std::vector<std::string>& overrides);

  bool Has(const std::string& key) const;
  absl::StatusOr<int64_t> GetInt(const std::string& key, std::optional<int64_t> fallback = std::nullopt);
  // GetInt, then "expected an integer in [lo, hi]" (naming the key) outside it.
  absl::StatusOr<int64_t> GetIntIn(const std::string& key, std::optional<int64_t> fallback, int64_t lo, int64_t hi);
  absl::StatusOr<double> GetDouble(const std::string& key, std::optional<double> fallback = std::nullopt);
  absl::StatusOr<bool> GetBool(const std::string& key, std::optional<bool> fallback = std::nullopt);
  absl::StatusOr<std::string> GetString(const std::string& key, std::optional<std::string> fallback = std::nullopt);
  absl::StatusOr<std::vector<double>> GetDoubleList(const std::string& key, std::optional<std::vector<double>> fallback = std::nullopt);
  absl::StatusOr<std::vector<int64_t>> GetIntList(const std::string& key, std::optional<std::vector<int64_t>> fallback = std::nullopt);
  absl::StatusOr<std::vector<std::vector<int64_t>>> GetIntListList(const std::string& key);
  absl::StatusOr<std::vector<std::string>> GetStringList(const std::string& key, std::optional<std::vector<std::string>> fallback = std::nullopt);
  // A nested mapping (absent -> empty map).
  absl::StatusOr<Options> GetMap(const std::string& key);
  // A sequence of mappings.
  absl::StatusOr<std::vector<Options>> GetMapList(const std::string& key);

  // Error naming this node's location, for checks that span several keys.
  absl::Status Error(const std::string& key, const std::string& message) const;
  // Fails on the first key that no getter has read.
  absl::Status CheckAllUsed() const;

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  // Resolves a path relative to the config file's folder (absolute paths stay).
  std::string ResolvePath(const std::string& relative) const;
  const YAML::Node& node() const { return node_; }
  // The mapping as YAML text (for the resolved config).
  std::string Dump() const;

 private:
  std::string KeyPath(const std::string& key) const;
  absl::Status TypeError(const std::string& key, const YAML::Node& value, const std::string& expected) const;
  absl::StatusOr<YAML::Node> Lookup(const std::string& key, bool required);

  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::shared_ptr<std::set<std::string>> used_;
};

// Sets the value at KEY.PATH in `root` ("decoding.seed", "methods[0].gamma":
// list items by index), making missing mappings on the way. `what` starts
// every error ("--set 'a.b=1'", "sweep key 'a.b'").
absl::Status SetAtPath(YAML::Node& root, const std::string& key_path, const YAML::Node& value,
                       const std::string& what);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_OPTIONS_H_
