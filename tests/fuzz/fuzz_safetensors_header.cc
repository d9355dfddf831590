// libFuzzer target: a .safetensors header (framework/model/safetensors_header.h).
// The first 8 input bytes give the data region's size; the rest is the header.
// Every entry accepted must lie inside the region, match its shape, and no two
// may share bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "framework/model/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t data_size = 0;
  std::memcpy(&data_size, data, 8);
  data_size %= uint64_t{1} << 40;
  const std::string_view header(reinterpret_cast<const char*>(data + 8), size - 8);
  auto entries = speclab::ParseSafetensorsHeader(header, data_size, "fuzz.safetensors");
  if (!entries.ok()) return 0;
  for (const speclab::SafetensorsEntry& e : *entries) {
    if (e.begin > e.end || e.end > data_size) std::abort();
    for (const speclab::SafetensorsEntry& other : *entries) {
      if (&other == &e || e.begin == e.end || other.begin == other.end) continue;
      if (e.begin < other.end && other.begin < e.end) std::abort();
    }
  }
  return 0;
}
