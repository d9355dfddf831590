// libFuzzer target: a prompt file (experiments/prompt_set.h). Accepted prompts
// have unique ids, non-empty text, and task names that cannot corrupt summary.csv.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "experiments/prompt_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto prompts = speclab::ParsePromptText(text, "fuzz.jsonl", /*per_task=*/0);
  if (!prompts.ok()) return 0;
  std::set<std::string> ids;
  for (const speclab::Prompt& p : *prompts) {
    if (!ids.insert(p.id).second || p.text.empty() || p.task.empty() || p.task == "all" ||
        p.task.find_first_of(",\n\"") != std::string::npos)
      std::abort();
  }
  return 0;
}
