#include "experiments/decode_bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/ScalarType.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "experiments/command_flags.h"
#include "experiments/model_loading.h"
#include "framework/core/status_macros.h"
#include "framework/error_text.h"
#include "framework/generation.h"
#include "framework/model/llama_model.h"
#include "framework/speculative_decoder.h"

namespace speclab {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kShippedDir[] = "models/speclab-target";
constexpr uint64_t kSeed = 1;
// Ids 0..2 are the special tokens of the shipped tokenizer (unk, bos, eos);
// random prompts stay clear of them.
constexpr int32_t kFirstPromptId = 3;
constexpr int kBandwidthWarmups = 3;
constexpr int kBandwidthRepeats = 20;

struct ShapeInfo {
  const char* name;
  const char* config;  // relative to the repository root
  bool random;         // random weights drawn on the device, else loaded
  bool cpu_default;    // part of the default list on CPU
};

constexpr ShapeInfo kShapes[] = {
    {"shipped", "models/speclab-target/config.json", false, true},
    {"1b", "configs/shapes/llama-3.2-1b.json", true, false},
    {"8b", "configs/shapes/llama-3.1-8b.json", true, false},
};

const ShapeInfo* FindShape(const std::string& name) {
  for (const ShapeInfo& s : kShapes)
    if (name == s.name) return &s;
  return nullptr;
}

// ---------------------------------------------------------------- flags

absl::StatusOr<std::vector<std::string>> ParseShapes(const std::string& list) {
  std::vector<std::string> shapes;
  for (absl::string_view piece : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    const std::string name(absl::StripAsciiWhitespace(piece));
    if (FindShape(name) == nullptr)
      return absl::InvalidArgumentError(absl::StrFormat("--shapes: unknown shape '%s' (valid: %s)", name,
                                                        absl::StrJoin(DecodeBenchShapeNames(), ", ")));
    // A shape listed twice is measured once.
    if (std::find(shapes.begin(), shapes.end(), name) == shapes.end()) shapes.push_back(name);
  }
  if (shapes.empty())
    return absl::InvalidArgumentError(
        absl::StrFormat("--shapes: empty list (valid: %s)", absl::StrJoin(DecodeBenchShapeNames(), ", ")));
  return shapes;
}

// Quotes an argument for the echoed command line when a shell would split it.
std::string ShellWord(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\"'\\$`") == std::string::npos) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// ---------------------------------------------------------------- measurement

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

void Synchronize(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

struct Bandwidth {
  double gb_per_s = 0;  // (bytes read + bytes written) / time, median
  int64_t buffer_bytes = 0;
};

// A large device-to-device copy reads and writes every byte once: the best
// rate a decoding step that streams its weights can hope for. The buffer is
// far larger than any cache (1 GiB on CUDA; 64 MiB on CPU, where a bigger one
// only slows the benchmark down).
absl::StatusOr<Bandwidth> MeasureCopyBandwidth(c10::Device device) {
  Bandwidth out;
  out.buffer_bytes = device.is_cuda() ? (int64_t{1} << 30) : (int64_t{64} << 20);
  try {
    c10::InferenceMode inference;
    const auto options = at::TensorOptions().dtype(at::kBFloat16).device(device);
    at::Tensor src = at::ones({out.buffer_bytes / 2}, options);
    at::Tensor dst = at::empty_like(src);
    for (int i = 0; i < kBandwidthWarmups; ++i) dst.copy_(src);
    std::vector<double> rates;
    for (int i = 0; i < kBandwidthRepeats; ++i) {
      Synchronize(device);
      const auto start = Clock::now();
      dst.copy_(src);
      Synchronize(device);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      rates.push_back(2.0 * static_cast<double>(out.buffer_bytes) / seconds / 1e9);
    }
    out.gb_per_s = Median(rates);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bandwidth measurement on ", device.str(), " failed: ", ErrorText(e)));
  }
  return out;
}

// The card's marketing name (nvidia-smi), so reports from different machines
// can be told apart; "cuda" when nvidia-smi is absent.
std::string DeviceDescription(c10::Device device) {
  if (!device.is_cuda()) {
    const int threads = at::get_num_threads();
    return absl::StrFormat("cpu (%d thread%s)", threads, threads == 1 ? "" : "s");
  }
  const std::string command = absl::StrFormat("nvidia-smi --query-gpu=name --format=csv,noheader -i %d 2>/dev/null",
                                              std::max<int>(device.index(), 0));
  std::string name;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[256] = {0};
    if (fgets(buffer, sizeof(buffer), pipe) != nullptr) name = std::string(absl::StripAsciiWhitespace(buffer));
    pclose(pipe);
  }
  return absl::StrCat(name.empty() ? "cuda" : name, " (", device.str(), ")");
}

std::vector<int32_t> RandomPrompt(int64_t vocab, int length) {
  std::mt19937_64 rng(kSeed);
  std::uniform_int_distribution<int32_t> id(kFirstPromptId, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> prompt(length);
  for (int32_t& token : prompt) token = id(rng);
  return prompt;
}

// One generation's decode throughput (prefill excluded).
absl::StatusOr<double> DecodeTokensPerSecond(LlamaModel& model, const std::vector<int32_t>& prompt,
                                             const DecodeOptions& options) {
  ASSIGN_OR_RETURN(Generation g, GenerateAutoregressive(model, prompt, options));
  if (g.tokens.empty() || !(g.decode_seconds > 0)) return absl::InternalError("decoding produced no timed tokens");
  return static_cast<double>(g.tokens.size()) / g.decode_seconds;
}

struct Row {
  std::string shape;
  int64_t params = 0;
  int64_t weight_bytes = 0;  // per decoding step
  int64_t kv_bytes = 0;      // per decoding step, at the mean context length
  std::string graphs;        // on | off | n/a (CPU)
  double tokens_per_s = 0;
  double floor_tokens_per_s = 0;

  double ms_per_token() const { return 1e3 / tokens_per_s; }
  double floor_ms_per_token() const { return 1e3 / floor_tokens_per_s; }
  double efficiency_pct() const { return 100.0 * tokens_per_s / floor_tokens_per_s; }
};

struct Settings {
  c10::Device device = c10::Device(c10::kCPU);
  at::ScalarType dtype = at::kFloat;
  int new_tokens = 0;
  int prompt_tokens = 0;
  int repeats = 0;
  std::string root;
  Bandwidth bandwidth;
};

absl::StatusOr<std::unique_ptr<LlamaModel>> MakeModel(const ShapeInfo& shape, const ModelConfig& config,
                                                      const Settings& s) {
  // A few spare slots past prompt + new tokens + the step's own token.
  const int64_t capacity = s.prompt_tokens + s.new_tokens + 16;
  if (shape.random) return LlamaModel::CreateRandomOnDevice(config, s.device, s.dtype, capacity, kSeed);
  return LlamaModel::Load((std::filesystem::path(s.root) / kShippedDir).string(), s.device, s.dtype, capacity);
}

// Graph settings to measure for a shape: CUDA graphs on (the model's default)
// and, for the shipped model or with --eager-too, off as well; --no-graphs
// measures only off. CPU has no graphs: one row.
std::vector<bool> GraphModes(const ShapeInfo& shape, const DecodeBenchFlags& flags, c10::Device device) {
  if (!device.is_cuda() || flags.no_graphs) return {false};
  if (!shape.random || flags.eager_too) return {true, false};
  return {true};
}

// Decodes with `model` in its current graph mode: one full-length warm-up (so
// every CUDA graph bucket the timed runs meet is already captured), then the
// median of `repeats` timed generations.
absl::StatusOr<double> MedianTokensPerSecond(LlamaModel& model, const std::vector<int32_t>& prompt, const Settings& s) {
  DecodeOptions options;
  options.sampling.temperature = 0;
  options.max_new_tokens = s.new_tokens;
  options.eos_token = -1;
  options.seed = kSeed;
  options.time_phases = false;
  RETURN_IF_ERROR(DecodeTokensPerSecond(model, prompt, options).status());
  std::vector<double> rates;
  for (int i = 0; i < s.repeats; ++i) {
    ASSIGN_OR_RETURN(double rate, DecodeTokensPerSecond(model, prompt, options));
    rates.push_back(rate);
  }
  return Median(rates);
}

// Measures one shape: its rows, one per graph mode. The model is freed on
// return, before the next shape is allocated (8B in bf16 is 16 GB).
absl::StatusOr<std::vector<Row>> BenchShape(const ShapeInfo& shape, const DecodeBenchFlags& flags, const Settings& s) {
  ASSIGN_OR_RETURN(ModelConfig config, LoadDecodeBenchShape(shape.name, s.root));
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, MakeModel(shape, config, s));
  const std::vector<int32_t> prompt = RandomPrompt(config.vocab_size, s.prompt_tokens);
  // Step t (0-based) attends to prompt_tokens + t cached tokens (itself included).
  const int64_t mean_context = s.prompt_tokens + (s.new_tokens - 1) / 2;
  Row base;
  base.shape = shape.name;
  base.params = config.ParameterCount();
  base.weight_bytes = model->DecodeWeightBytes();
  base.kv_bytes = KvBytesPerStep(config, mean_context, static_cast<int64_t>(c10::elementSize(s.dtype)));
  const double floor_seconds = static_cast<double>(base.weight_bytes + base.kv_bytes) / (s.bandwidth.gb_per_s * 1e9);
  base.floor_tokens_per_s = 1.0 / floor_seconds;

  std::vector<Row> rows;
  for (bool graphs : GraphModes(shape, flags, s.device)) {
    model->EnableCudaGraphs(graphs);
    Row row = base;
    // Report what the model actually does (sliding-window models stay eager).
    row.graphs = !s.device.is_cuda() ? "n/a" : (model->cuda_graphs_enabled() ? "on" : "off");
    ASSIGN_OR_RETURN(row.tokens_per_s, MedianTokensPerSecond(*model, prompt, s));
    std::cerr << absl::StrFormat("bench-decode: %s graphs %s: %.1f tokens/s\n", row.shape, row.graphs,
                                 row.tokens_per_s);
    rows.push_back(row);
  }
  return rows;
}

// ---------------------------------------------------------------- report

// "1.24B" parameters: the way model sizes are usually named.
std::string ParamCount(int64_t params) {
  const double p = static_cast<double>(params);
  if (p >= 1e9) return absl::StrFormat("%.2fB", p / 1e9);
  if (p >= 1e6) return absl::StrFormat("%.1fM", p / 1e6);
  return absl::StrFormat("%d", params);
}

std::string HumanCount(double value, const char* unit) {
  constexpr std::pair<double, const char*> kScales[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (const auto& [scale, prefix] : kScales)
    if (value >= scale) return absl::StrFormat("%.2f %s%s", value / scale, prefix, unit);
  return absl::StrFormat("%.0f %s", value, unit);
}

std::string DtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return c10::toString(dtype);
  }
}

std::string FormatMarkdown(const std::vector<Row>& rows, const Settings& s, const std::string& device_name,
                           const std::string& command_line) {
  std::string out =
      absl::StrFormat("# Batch-1 decoding vs. the bandwidth floor: %s, %s\n\n", device_name, DtypeName(s.dtype));
  absl::StrAppendFormat(&out,
                        "- copy bandwidth: %.1f GB/s (device-to-device copy of %d MiB, read + write, median of %d)\n",
                        s.bandwidth.gb_per_s, s.bandwidth.buffer_bytes >> 20, kBandwidthRepeats);
  absl::StrAppendFormat(&out,
                        "- greedy, prompt %d random tokens, %d new tokens, median of %d generations after one "
                        "warm-up; floor = (weight bytes + KV bytes at the mean context) / bandwidth\n",
                        s.prompt_tokens, s.new_tokens, s.repeats);
  absl::StrAppendFormat(&out, "- command: `%s`\n\n", command_line);
  out +=
      "| shape | params | weight bytes read/token | graphs | tokens/s | ms/token | floor ms/token | % of floor |\n"
      "|---|---:|---:|---|---:|---:|---:|---:|\n";
  for (const Row& r : rows) {
    absl::StrAppendFormat(&out, "| %s | %s | %s | %s | %.1f | %.3f | %.3f | %.1f%% |\n", r.shape, ParamCount(r.params),
                          HumanCount(static_cast<double>(r.weight_bytes), "B"), r.graphs, r.tokens_per_s,
                          r.ms_per_token(), r.floor_ms_per_token(), r.efficiency_pct());
  }
  return out;
}

std::string FormatCsv(const std::vector<Row>& rows, const Settings& s, const std::string& device_name) {
  std::string out =
      "shape,params,weight_bytes,kv_bytes_mean,graphs,tokens_per_s,ms_per_token,floor_tokens_per_s,"
      "floor_ms_per_token,efficiency_pct,device,dtype,bandwidth_gb_per_s,prompt_tokens,new_tokens,repeats\n";
  // Device names carry no commas or quotes in practice; quote anyway.
  for (const Row& r : rows) {
    absl::StrAppendFormat(&out, "%s,%d,%d,%d,%s,%.3f,%.4f,%.3f,%.4f,%.2f,\"%s\",%s,%.1f,%d,%d,%d\n", r.shape, r.params,
                          r.weight_bytes, r.kv_bytes, r.graphs, r.tokens_per_s, r.ms_per_token(), r.floor_tokens_per_s,
                          r.floor_ms_per_token(), r.efficiency_pct(), device_name, DtypeName(s.dtype),
                          s.bandwidth.gb_per_s, s.prompt_tokens, s.new_tokens, s.repeats);
  }
  return out;
}

absl::Status WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path.string(), ": cannot write"));
  return absl::OkStatus();
}

absl::Status WriteReports(const std::string& dir, const std::string& markdown, const std::string& csv) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat(dir, ": cannot create folder: ", error.message()));
  RETURN_IF_ERROR(WriteText(std::filesystem::path(dir) / "decode_bench.md", markdown));
  return WriteText(std::filesystem::path(dir) / "decode_bench.csv", csv);
}

// The shapes to run: as listed, or the defaults for the device (the random
// billion-parameter shapes take minutes per token budget on CPU).
std::vector<const ShapeInfo*> SelectShapes(const DecodeBenchFlags& flags, c10::Device device) {
  std::vector<const ShapeInfo*> shapes;
  if (!flags.shapes.empty()) {
    for (const std::string& name : flags.shapes) shapes.push_back(FindShape(name));
    return shapes;
  }
  for (const ShapeInfo& s : kShapes)
    if (device.is_cuda() || s.cpu_default) shapes.push_back(&s);
  if (!device.is_cuda()) std::cerr << "bench-decode: on CPU only 'shipped' runs unless --shapes names more\n";
  return shapes;
}

absl::StatusOr<Settings> ResolveSettings(const DecodeBenchFlags& flags) {
  Settings s;
  ASSIGN_OR_RETURN(s.device, ParseDevice(flags.device));
  ASSIGN_OR_RETURN(s.dtype, ParseDtype("auto", s.device));
  s.new_tokens = flags.new_tokens > 0 ? flags.new_tokens : (s.device.is_cuda() ? 128 : 32);
  s.prompt_tokens = flags.prompt_tokens;
  s.repeats = flags.repeats;
  s.root = flags.root;
  return s;
}

absl::Status RunDecodeBenchImpl(const DecodeBenchFlags& flags) {
  ASSIGN_OR_RETURN(Settings s, ResolveSettings(flags));
  ASSIGN_OR_RETURN(s.bandwidth, MeasureCopyBandwidth(s.device));
  std::cerr << absl::StrFormat("bench-decode: copy bandwidth %.1f GB/s\n", s.bandwidth.gb_per_s);
  std::vector<Row> rows;
  for (const ShapeInfo* shape : SelectShapes(flags, s.device)) {
    auto shape_rows = BenchShape(*shape, flags, s);
    if (!shape_rows.ok())
      return absl::Status(shape_rows.status().code(),
                          absl::StrCat("shape '", shape->name, "': ", shape_rows.status().message()));
    rows.insert(rows.end(), shape_rows->begin(), shape_rows->end());
  }
  const std::string device_name = DeviceDescription(s.device);
  const std::string markdown = FormatMarkdown(rows, s, device_name, flags.command_line);
  std::cout << markdown << std::flush;
  if (flags.out_dir.empty()) return absl::OkStatus();
  return WriteReports(flags.out_dir, markdown, FormatCsv(rows, s, device_name));
}

}  // namespace

const std::vector<std::string>& DecodeBenchShapeNames() {
  static const auto* names = [] {
    auto* out = new std::vector<std::string>;
    for (const ShapeInfo& s : kShapes) out->push_back(s.name);
    return out;
  }();
  return *names;
}

absl::StatusOr<DecodeBenchFlags> ParseDecodeBenchFlags(const std::vector<std::string>& args) {
  DecodeBenchFlags flags;
  std::vector<std::string> words = {"speclab", "bench-decode"};
  for (const std::string& a : args) words.push_back(ShellWord(a));
  flags.command_line = absl::StrJoin(words, " ");
  const std::vector<CommandFlag> table = {
      {"--out", "DIR", [&](const std::string& v) { flags.out_dir = v; return absl::OkStatus(); }},
      {"--shapes", "LIST",
       [&](const std::string& v) -> absl::Status {
         ASSIGN_OR_RETURN(flags.shapes, ParseShapes(v));
         return absl::OkStatus();
       }},
      {"--new-tokens", "N", PositiveInto("--new-tokens", flags.new_tokens, 1 << 20)},
      {"--prompt-tokens", "P", PositiveInto("--prompt-tokens", flags.prompt_tokens, 1 << 20)},
      {"--repeats", "R", PositiveInto("--repeats", flags.repeats, 1000)},
      {"--device", "auto|cpu|cuda|cuda:N", [&](const std::string& v) { flags.device = v; return absl::OkStatus(); }},
      {"--no-graphs", nullptr, [&](const std::string&) { flags.no_graphs = true; return absl::OkStatus(); }},
      {"--eager-too", nullptr, [&](const std::string&) { flags.eager_too = true; return absl::OkStatus(); }},
  };
  RETURN_IF_ERROR(ApplyCommandFlags(args, table));
  return flags;
}

absl::StatusOr<ModelConfig> LoadDecodeBenchShape(const std::string& name, const std::string& root) {
  const ShapeInfo* shape = FindShape(name);
  if (shape == nullptr)
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown shape '%s' (valid: %s)", name, absl::StrJoin(DecodeBenchShapeNames(), ", ")));
  return ModelConfig::FromJsonFile((std::filesystem::path(root) / shape->config).string());
}

int64_t KvBytesPerStep(const ModelConfig& config, int64_t context, int64_t element_size) {
  // K and V of every layer and KV head, `context` positions each.
  return 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * context * element_size;
}

absl::Status RunDecodeBench(const DecodeBenchFlags& flags) {
  // LibTorch reports errors by throwing; none may leave the benchmark.
  try {
    return RunDecodeBenchImpl(flags);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bench-decode failed: ", ErrorText(e)));
  }
}

}  // namespace speclab
