#include "framework/plugin_loader.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/registry.h"
#include "framework/plugin.h"

namespace speclab {

absl::Status LoadPlugin(const std::string& path) {
  static std::mutex mutex;
  static std::set<std::string>* loaded = new std::set<std::string>();
  const std::lock_guard<std::mutex> lock(mutex);
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    return absl::NotFoundError(absl::StrCat("plugin ", path, ": no such file"));
  const std::string canonical = std::filesystem::canonical(path, error).string();
  if (loaded->count(canonical)) return absl::OkStatus();
  // The library's static registrations run inside dlopen: conflicts they meet
  // are recorded by Registry::Add and read back here.
  const size_t conflicts_before = RegistrationConflicts().size();
  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return absl::InvalidArgumentError(absl::StrCat("plugin ", path, ": cannot load: ", dlerror()));
  loaded->insert(canonical);  // its registrations stay, whatever follows
  using AbiFunction = const char* (*)();
  auto abi = reinterpret_cast<AbiFunction>(dlsym(handle, "speclab_plugin_abi"));
  if (abi == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("plugin ", path,
                                                   ": not a speclab plugin (no SPECLAB_PLUGIN() in it; see "
                                                   "framework/plugin.h)"));
  if (std::string(abi()) != SPECLAB_PLUGIN_ABI)
    return absl::FailedPreconditionError(absl::StrCat("plugin ", path, " was built against ", abi(), "; this is ",
                                                      SPECLAB_PLUGIN_ABI, ": rebuild it against this installation"));
  const std::vector<std::string>& conflicts = RegistrationConflicts();
  if (conflicts.size() > conflicts_before) {
    const std::vector<std::string> names(conflicts.begin() + conflicts_before, conflicts.end());
    return absl::AlreadyExistsError(absl::StrCat("plugin ", path, " registers ", absl::StrJoin(names, ", "),
                                                 ", already registered (rename the plugin)"));
  }
  return absl::OkStatus();
}

}  // namespace speclab
