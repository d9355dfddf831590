// `speclab bench-decode`: batch-1 autoregressive decoding against the
// memory-bandwidth floor.
//
// At batch 1 a decoding step must read every weight it uses plus the KV cache
// once, so (bytes read per step) / (device copy bandwidth) is a lower bound on
// the time per token. The benchmark measures that bandwidth with a large
// device-to-device copy, decodes with each requested model shape, and reports
// how close each comes to the floor:
//
//   shipped  models/speclab-target (the embedded target), loaded from disk
//   1b       Llama-3.2-1B's shape, random weights (configs/shapes/llama-3.2-1b.json)
//   8b       Llama-3.1-8B's shape, random weights (configs/shapes/llama-3.1-8b.json)
//
// Paths are relative to the current directory (the repository root).
#ifndef SPECLAB_EXPERIMENTS_DECODE_BENCH_H_
#define SPECLAB_EXPERIMENTS_DECODE_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/model/model_config.h"

namespace speclab {

struct DecodeBenchFlags {
  std::string out_dir;              // "": print only
  std::vector<std::string> shapes;  // empty: shipped,1b,8b on CUDA, shipped on CPU
  int new_tokens = 0;               // 0: 128 on CUDA, 32 on CPU
  int prompt_tokens = 32;
  int repeats = 3;              // timed generations per row; the median is reported
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  bool no_graphs = false;       // every row eager
  bool eager_too = false;       // 1b/8b also get an eager row (shipped always does)
  std::string command_line;     // as typed, for the report header
  std::string root = ".";       // repository root (models/, configs/); not a flag
};

// The shape names --shapes accepts, in report order.
const std::vector<std::string>& DecodeBenchShapeNames();

// Parses the arguments after "bench-decode". Unknown flags and shape names
// are InvalidArgument errors that list the valid ones.
absl::StatusOr<DecodeBenchFlags> ParseDecodeBenchFlags(const std::vector<std::string>& args);

// The config of a shape, read from `root` (the repository root): config.json of
// the shipped model, or configs/shapes/<file>.json for 1b/8b.
absl::StatusOr<ModelConfig> LoadDecodeBenchShape(const std::string& name, const std::string& root = ".");

// Bytes of KV cache one decoding step reads at `context` cached tokens.
int64_t KvBytesPerStep(const ModelConfig& config, int64_t context, int64_t element_size);

// Runs the benchmark and prints the Markdown report (and writes
// decode_bench.md / decode_bench.csv under flags.out_dir when set).
absl::Status RunDecodeBench(const DecodeBenchFlags& flags);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_DECODE_BENCH_H_
