// libFuzzer target: a model's config.json (framework/model/model_config.h).
// An accepted config must validate, and write and read back as the same config.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "framework/model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = speclab::ModelConfig::FromJsonText(text, "config.json");
  if (!config.ok()) return 0;
  if (!config->Validate().ok()) std::abort();
  static const std::string path = "/tmp/speclab_fuzz_config_" + std::to_string(::getpid()) + ".json";
  if (!config->WriteJsonFile(path).ok()) std::abort();
  auto again = speclab::ModelConfig::FromJsonFile(path);
  if (!again.ok() || again->vocab_size != config->vocab_size || again->hidden_size != config->hidden_size ||
      again->num_hidden_layers != config->num_hidden_layers)
    std::abort();
  return 0;
}
