// Plugins built outside speclab's tree.
//
// A plugin library is a shared library (CMake: add_library(NAME MODULE ...)
// linked to speclab::speclab, from find_package(speclab)) whose translation
// units register drafters, tree builders, verifiers or length policies exactly
// as built-in plugins do (DrafterRegistry::Add, ...). An experiment loads it
// with `plugins: [path/to/libNAME.so]` (relative to the experiment's file);
// `speclab list` and `speclab audit` take `--plugin PATH`. One of its source
// files says which speclab it was built against:
//
//   #include "framework/plugin.h"
//   SPECLAB_PLUGIN();
//
// and the loader (framework/plugin_loader.h) refuses a library built against
// another speclab or LibTorch version, and one that registers a name already
// taken. examples/out_of_tree/ is such a project.
#ifndef SPECLAB_FRAMEWORK_PLUGIN_H_
#define SPECLAB_FRAMEWORK_PLUGIN_H_

#include <torch/version.h>

#include "framework/core/version.h"

#define SPECLAB_PLUGIN_STRINGIZE_(x) #x
#define SPECLAB_PLUGIN_STRINGIZE(x) SPECLAB_PLUGIN_STRINGIZE_(x)

// "speclab 0.5.0, LibTorch 1.13": what a plugin and the loader must agree on.
#define SPECLAB_PLUGIN_ABI                                                                    \
  "speclab " SPECLAB_VERSION ", LibTorch " SPECLAB_PLUGIN_STRINGIZE(TORCH_VERSION_MAJOR) "." \
      SPECLAB_PLUGIN_STRINGIZE(TORCH_VERSION_MINOR)

// The symbol the loader looks up in a plugin library.
#define SPECLAB_PLUGIN()                                                                           \
  extern "C" __attribute__((visibility("default"))) const char* speclab_plugin_abi() { \
    return SPECLAB_PLUGIN_ABI;                                                                     \
  }                                                                                                \
  static_assert(true, "")

#endif  // SPECLAB_FRAMEWORK_PLUGIN_H_
