// Parsing a HuggingFace tokenizer.json: speclab's reader (framework/core/json.h)
// against nlohmann-json (Debian's nlohmann-json3-dev), where it is installed.
// The file: $SPECLAB_JSON_BENCH_FILE, or the qwen3 fixture (5.4 MB).
// Run: build/speclab_bench --benchmark_filter=Json
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "framework/core/json.h"

#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#define SPECLAB_HAVE_NLOHMANN_JSON 1
#endif

namespace speclab {
namespace {

const std::string& TokenizerText() {
  static const std::string text = [] {
    const char* file = std::getenv("SPECLAB_JSON_BENCH_FILE");
    std::ifstream in(file ? file : SPECLAB_SOURCE_DIR "/tests/fixtures/tokenizers/qwen3/tokenizer.json");
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
  }();
  return text;
}

void BM_JsonSpeclab(benchmark::State& state) {
  const std::string& text = TokenizerText();
  for (auto _ : state) {
    auto parsed = ParseJson(text, "tokenizer.json");
    if (!parsed.ok()) state.SkipWithError(std::string(parsed.status().message()).c_str());
    benchmark::DoNotOptimize(parsed);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_JsonSpeclab)->Unit(benchmark::kMillisecond);

#ifdef SPECLAB_HAVE_NLOHMANN_JSON
void BM_JsonNlohmann(benchmark::State& state) {
  const std::string& text = TokenizerText();
  for (auto _ : state) {
    nlohmann::json parsed = nlohmann::json::parse(text);
    benchmark::DoNotOptimize(parsed);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_JsonNlohmann)->Unit(benchmark::kMillisecond);
#endif

}  // namespace
}  // namespace speclab
