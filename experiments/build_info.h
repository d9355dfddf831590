// What this binary was built from: `speclab --version`, and the revision a
// run records (its git_revision.txt).
#ifndef SPECLAB_EXPERIMENTS_BUILD_INFO_H_
#define SPECLAB_EXPERIMENTS_BUILD_INFO_H_

#include <string>

namespace speclab {

// The source tree's git revision at build time ("unknown" outside a git
// checkout), and whether tracked files differed from it.
std::string BuildRevision();
bool BuildTreeWasDirty();

// "speclab 0.5.0 (revision REV)", ", dirty" added where it was.
std::string VersionLine();

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_BUILD_INFO_H_
