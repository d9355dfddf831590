// libFuzzer target: experiment YAML as the loader reads it (framework/core/options.h).
// Every key is read with every typed getter, nested maps and lists of maps are
// walked, and the resolved text (Dump) must parse back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "framework/core/options.h"

namespace {

void Walk(speclab::Options& options, int depth) {
  if (depth > 8 || !options.node().IsMap()) return;
  std::vector<std::string> keys;
  for (const auto& item : options.node()) {
    if (item.first.IsScalar()) keys.push_back(item.first.Scalar());
  }
  for (const std::string& key : keys) {
    (void)options.Has(key);
    (void)options.GetInt(key);
    (void)options.GetDouble(key);
    (void)options.GetBool(key);
    (void)options.GetString(key);
    (void)options.GetDoubleList(key);
    (void)options.GetIntList(key);
    (void)options.GetIntListList(key);
    (void)options.GetStringList(key);
    if (auto map = options.GetMap(key); map.ok()) Walk(*map, depth + 1);
    if (auto maps = options.GetMapList(key); maps.ok())
      for (speclab::Options& item : *maps) Walk(item, depth + 1);
  }
  (void)options.CheckAllUsed();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto options = speclab::Options::FromString(text, "fuzz.yaml");
  if (!options.ok()) return 0;
  const std::string dumped = options->Dump();
  Walk(*options, 0);
  // What a run records as its resolved config must load again.
  if (!speclab::Options::FromString(dumped, "resolved.yaml").ok()) std::abort();
  return 0;
}
