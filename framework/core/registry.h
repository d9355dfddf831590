// Registry: plugins register themselves by name from their own folder.
//
//   static const bool kRegistered = VerifierRegistry::Add({
//       .name = "rejection", .description = "...", .lossless = "lossless",
//       .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<Verifier>> {...}});
//
// No central switch: the plugin's translation unit is linked as an object
// file (CMake's speclab_plugins), so its static registration always runs;
// plugins built out of the tree register when their library is loaded
// (framework/plugin.h).
#ifndef SPECLAB_FRAMEWORK_CORE_REGISTRY_H_
#define SPECLAB_FRAMEWORK_CORE_REGISTRY_H_

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/options.h"

namespace speclab {

// Names that a registration found already taken, in order, as "'name'"
// (the plugin loader reports the ones a library caused).
inline std::vector<std::string>& RegistrationConflicts() {
  static auto* conflicts = new std::vector<std::string>();
  return *conflicts;
}

template <typename Interface, typename... Args>
class Registry {
 public:
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Interface>>(Options&, Args...)>;
  struct Entry {
    std::string name;
    std::string description;  // one line, for `speclab list`
    std::string lossless;     // "lossless", "lossy" or "-" (not a property of this plugin)
    Factory create;
  };

  // False (and the name recorded in RegistrationConflicts) where `entry.name` is taken.
  static bool Add(Entry entry) {
    std::string name = entry.name;
    if (Entries().emplace(name, std::move(entry)).second) return true;
    RegistrationConflicts().push_back(absl::StrCat("'", name, "'"));
    return false;
  }

  static std::vector<const Entry*> List() {
    std::vector<const Entry*> out;
    for (const auto& [name, entry] : Entries()) out.push_back(&entry);
    return out;
  }

  static const Entry* Find(const std::string& name) {
    auto it = Entries().find(name);
    return it == Entries().end() ? nullptr : &it->second;
  }

  // Builds the plugin described by `spec` ({type: NAME, ...its options}) and
  // refuses options the plugin did not read. `category` names the kind in errors.
  static absl::StatusOr<std::unique_ptr<Interface>> Create(Options& spec, const std::string& category,
                                                           Args... args) {
    auto type = spec.GetString("type");
    if (!type.ok()) return type.status();
    const Entry* entry = Find(*type);
    if (entry == nullptr) {
      std::vector<std::string> names;
      for (const auto& [name, unused] : Entries()) names.push_back(name);
      return spec.Error("type", absl::StrCat("unknown ", category, " '", *type,
                                             "' (registered: ", absl::StrJoin(names, ", "), ")"));
    }
    auto plugin = entry->create(spec, args...);
    if (!plugin.ok()) {
      // A typo ("pth" for "path") shows up as a missing key; name both.
      if (auto unused = spec.CheckAllUsed(); !unused.ok())
        return absl::Status(plugin.status().code(), absl::StrCat(plugin.status().message(), "; ", unused.message()));
      return plugin.status();
    }
    if (auto unused = spec.CheckAllUsed(); !unused.ok()) return unused;
    return plugin;
  }

 private:
  static std::map<std::string, Entry>& Entries() {
    static auto* entries = new std::map<std::string, Entry>();
    return *entries;
  }
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_REGISTRY_H_
