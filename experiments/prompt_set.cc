#include "experiments/prompt_set.h"

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "yaml-cpp/yaml.h"

namespace speclab {

absl::StatusOr<std::vector<Prompt>> ReadPromptFile(const std::string& path, int per_task) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open prompt file"));
  std::vector<Prompt> prompts;
  std::map<std::string, int> per_task_count;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    YAML::Node object;
    try {
      object = YAML::Load(line);  // a JSON object is a YAML flow mapping
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": invalid JSON: ", e.msg));
    }
    if (!object.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": expected a JSON object"));
    Prompt prompt;
    for (auto [key, field] : {std::pair{"id", &prompt.id}, {"task", &prompt.task}, {"prompt", &prompt.text}}) {
      if (!object[key] || !object[key].IsScalar())
        return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": key '", key, "': expected a string"));
      *field = object[key].Scalar();
    }
    // The summary's aggregate row is task `all`, and its CSV is comma-separated.
    if (prompt.task == "all" || prompt.task.find_first_of(",\n\"") != std::string::npos)
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": key 'task': '", prompt.task,
                                                     "' is reserved ('all': the aggregate) or holds a comma, quote "
                                                     "or newline (summary.csv's separators)"));
    if (per_task > 0 && per_task_count[prompt.task]++ >= per_task) continue;
    prompts.push_back(std::move(prompt));
  }
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts"));
  return prompts;
}

}  // namespace speclab
