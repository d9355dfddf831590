#include "experiments/command_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

std::string ValidFlags(const std::vector<CommandFlag>& flags) {
  std::vector<std::string> out;
  for (const CommandFlag& f : flags) out.push_back(f.value ? absl::StrCat(f.name, " ", f.value) : f.name);
  return absl::StrJoin(out, ", ");
}

}  // namespace

absl::Status ApplyCommandFlags(const std::vector<std::string>& args, const std::vector<CommandFlag>& flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const CommandFlag* flag = nullptr;
    for (const CommandFlag& f : flags)
      if (name == f.name) flag = &f;
    if (flag == nullptr) {
      const char* what = absl::StartsWith(arg, "--") ? "unknown flag" : "unexpected argument";
      return absl::InvalidArgumentError(absl::StrFormat("%s '%s' (valid: %s)", what, name, ValidFlags(flags)));
    }
    if (flag->value == nullptr) {
      if (eq != std::string::npos) return absl::InvalidArgumentError(absl::StrCat(name, " takes no value"));
      RETURN_IF_ERROR(flag->apply(""));
    } else if (eq != std::string::npos) {
      RETURN_IF_ERROR(flag->apply(arg.substr(eq + 1)));
    } else if (i + 1 < args.size()) {
      RETURN_IF_ERROR(flag->apply(args[++i]));
    } else {
      return absl::InvalidArgumentError(absl::StrFormat("%s needs a value (%s)", name, flag->value));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ParsePositiveFlag(const std::string& flag, const std::string& value, int max) {
  int out = 0;
  if (!absl::SimpleAtoi(value, &out) || out < 1 || out > max)
    return absl::InvalidArgumentError(absl::StrFormat("%s: expected an integer in [1, %d], got '%s'", flag, max, value));
  return out;
}

std::function<absl::Status(const std::string&)> PositiveInto(const char* flag, int& into, int max) {
  return [flag, &into, max](const std::string& value) -> absl::Status {
    ASSIGN_OR_RETURN(into, ParsePositiveFlag(flag, value, max));
    return absl::OkStatus();
  };
}

}  // namespace speclab
