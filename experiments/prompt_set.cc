#include "experiments/prompt_set.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "framework/core/json.h"

namespace speclab {
namespace {

constexpr const char* kKeys[] = {"id", "task", "prompt"};

// One line of a prompt file: a JSON object with exactly the string members
// "id", "task" and "prompt" (strict JSON: YAML's flow maps and numbers given
// for strings are refused, as they would decode something else than meant).
absl::StatusOr<Prompt> ParsePromptLine(const std::string& line, const std::string& where) {
  auto object = ParseJson(line, where);
  if (!object.ok()) return object.status();
  if (!object->is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a JSON object, got ",
                                                                            JsonValue::TypeName(object->type())));
  std::set<std::string> seen;
  for (const auto& [key, value] : object->object()) {
    if (key != "id" && key != "task" && key != "prompt")
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown key '", key, "' (a prompt has exactly \"id\", \"task\" and \"prompt\")"));
    if (!seen.insert(key).second)
      return absl::InvalidArgumentError(absl::StrCat(where, ": key '", key, "' appears twice"));
    if (!value.is_string())
      return absl::InvalidArgumentError(absl::StrCat(where, ": key '", key, "': expected a string, got ",
                                                     JsonValue::TypeName(value.type())));
  }
  for (const char* key : kKeys)
    if (!seen.count(key)) return absl::InvalidArgumentError(absl::StrCat(where, ": key '", key, "' is missing"));
  Prompt prompt{object->Find("id")->string_value(), object->Find("task")->string_value(),
                object->Find("prompt")->string_value()};
  if (prompt.id.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": key 'id': expected a non-empty string"));
  if (prompt.text.empty())
    return absl::InvalidArgumentError(absl::StrCat(where, ": key 'prompt': expected a non-empty string"));
  // The summary's aggregate row is task `all`, and its CSV is comma-separated.
  if (prompt.task.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": key 'task': expected a non-empty string"));
  if (prompt.task == "all")
    return absl::InvalidArgumentError(absl::StrCat(where, ": key 'task': 'all' is reserved (the aggregate row)"));
  if (prompt.task.find_first_of(",\n\r\"") != std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat(where, ": key 'task': '", prompt.task,
                                                   "' holds a comma, quote or newline (summary.csv's separators)"));
  return prompt;
}

}  // namespace

absl::StatusOr<std::vector<Prompt>> ParsePromptText(std::string_view text, const std::string& path, int per_task) {
  std::vector<Prompt> prompts;
  std::map<std::string, int> per_task_count;
  std::map<std::string, int> line_of_id;
  int number = 0;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    if (absl::StripAsciiWhitespace(absl::string_view(line.data(), line.size())).empty()) continue;
    const std::string where = absl::StrCat(path, ":", number);
    auto prompt = ParsePromptLine(std::string(line), where);
    if (!prompt.ok()) return prompt.status();
    auto [it, fresh] = line_of_id.emplace(prompt->id, number);
    if (!fresh)
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": key 'id': '", prompt->id, "' was already used on line ", it->second));
    if (per_task > 0 && per_task_count[prompt->task]++ >= per_task) continue;
    prompts.push_back(*std::move(prompt));
  }
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts"));
  return prompts;
}

absl::StatusOr<std::vector<Prompt>> ReadPromptFile(const std::string& path, int per_task) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open prompt file"));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return ParsePromptText(text.str(), path, per_task);
}

}  // namespace speclab
