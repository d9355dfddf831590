#include "framework/core/file_util.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"

namespace speclab {

void RemoveTree(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return;
  if (!S_ISDIR(info.st_mode)) {
    ::unlink(path.c_str());
    return;
  }
  std::vector<std::string> names;
  if (DIR* dir = ::opendir(path.c_str())) {
    while (const dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
  }
  for (const std::string& name : names) RemoveTree(path + "/" + name);
  ::rmdir(path.c_str());
}

absl::Status MoveInPlace(const std::string& partial, const std::string& path) {
  if (std::rename(partial.c_str(), path.c_str()) != 0)
    return absl::DataLossError(absl::StrCat(path, ": cannot move the written file in place: ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return content;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& content) {
  // The process id keeps two writers of one file (shards of a sweep) apart.
  const std::string partial = absl::StrCat(path, ".partial.", ::getpid());
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) return absl::DataLossError(absl::StrCat(partial, ": write failed (disk full? no permission?)"));
  }
  return MoveInPlace(partial, path);
}

}  // namespace speclab
