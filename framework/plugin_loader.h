// Loads plugin libraries at run time (framework/plugin.h says how to build one).
#ifndef SPECLAB_FRAMEWORK_PLUGIN_LOADER_H_
#define SPECLAB_FRAMEWORK_PLUGIN_LOADER_H_

#include <string>

#include "absl/status/status.h"

namespace speclab {

// Loads the shared library at `path` once (a second call with the same file
// does nothing): its registrations join the registries. Errors name the file:
// missing, not loadable (the loader's own message), not a speclab plugin (no
// SPECLAB_PLUGIN()), built against another speclab or LibTorch version, or
// registering a name that is already registered.
absl::Status LoadPlugin(const std::string& path);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_PLUGIN_LOADER_H_
