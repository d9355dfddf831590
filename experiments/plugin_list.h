// The registered plugins, as `speclab list` prints them.
#ifndef SPECLAB_EXPERIMENTS_PLUGIN_LIST_H_
#define SPECLAB_EXPERIMENTS_PLUGIN_LIST_H_

#include <string>

namespace speclab {

// One line per plugin: "category<TAB>name<TAB>lossless|lossy|-<TAB>description"
// with `tsv`, else an aligned table. Categories: drafter, tree_builder,
// verifier, length_policy.
std::string FormatPluginList(bool tsv);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_PLUGIN_LIST_H_
