// File-system helpers that are safe in every build of speclab.
#ifndef SPECLAB_FRAMEWORK_CORE_FILE_UTIL_H_
#define SPECLAB_FRAMEWORK_CORE_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace speclab {

// Deletes a file or a folder tree (no error if absent). Not
// std::filesystem::remove_all: PyTorch's LibTorch 2.x wheels export their own
// copy of libstdc++'s filesystem symbols, and that remove_all crashes (a call
// through a null pointer) on non-empty folders when it wins symbol resolution.
void RemoveTree(const std::string& path);

// The whole of `path`, or an error naming it.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `content` to `path` atomically (PATH.partial, then one rename), so
// that a killed process never leaves half a file; says if it could not.
absl::Status WriteFileAtomically(const std::string& path, const std::string& content);

// Moves a finished file from `partial` to `path` (one rename: atomic).
absl::Status MoveInPlace(const std::string& partial, const std::string& path);

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_CORE_FILE_UTIL_H_
