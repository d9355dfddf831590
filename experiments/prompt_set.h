// PromptSet: prompts from JSONL files, one {"id", "task", "prompt"} object a line.
#ifndef SPECLAB_EXPERIMENTS_PROMPT_SET_H_
#define SPECLAB_EXPERIMENTS_PROMPT_SET_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace speclab {

struct Prompt {
  std::string id;
  std::string task;
  std::string text;
};

// Reads every line of `path`; errors name the file and line. `per_task` > 0
// keeps the first `per_task` prompts of each task.
absl::StatusOr<std::vector<Prompt>> ReadPromptFile(const std::string& path, int per_task);

// The same from the file's text: strict JSON Lines, each line an object with
// exactly the string members "id" (unique), "task" (not `all`, no comma,
// quote or newline) and "prompt" (not empty). `path` names it in errors.
absl::StatusOr<std::vector<Prompt>> ParsePromptText(std::string_view text, const std::string& path, int per_task);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_PROMPT_SET_H_
