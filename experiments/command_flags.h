// Flags of the speclab subcommands: `--name VALUE`, `--name=VALUE`, or
// `--name` alone for a switch. A subcommand lists its flags in a table: the
// name, a placeholder for its value (nullptr: a switch) and what applies it.
#ifndef SPECLAB_EXPERIMENTS_COMMAND_FLAGS_H_
#define SPECLAB_EXPERIMENTS_COMMAND_FLAGS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace speclab {

struct CommandFlag {
  const char* name;   // "--new-tokens"
  const char* value;  // "N", shown in errors; nullptr: a switch
  std::function<absl::Status(const std::string& value)> apply;  // a switch gets ""
};

// Applies `args` in order. Errors name the argument: an unknown flag or a
// stray argument (with the valid flags), a missing value, a value given to a
// switch; apply's own errors pass through.
absl::Status ApplyCommandFlags(const std::vector<std::string>& args, const std::vector<CommandFlag>& flags);

// The integer in [1, max] that `value` spells, or an error naming `flag`.
absl::StatusOr<int> ParsePositiveFlag(const std::string& flag, const std::string& value, int max);

// An apply that stores ParsePositiveFlag's integer in `into`.
std::function<absl::Status(const std::string&)> PositiveInto(const char* flag, int& into, int max);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_COMMAND_FLAGS_H_
