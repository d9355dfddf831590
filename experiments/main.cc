// speclab: the command-line entry point.
//
//   speclab run EXPERIMENT.yaml [--set key.path=value ...] [--out DIR] [--trace DIR]
//   speclab list [--format=tsv] [--plugin LIB.so ...]
//   speclab audit [--format=tsv] [--seed N] [--plugin LIB.so ...]
//   speclab train TRAIN.yaml [--set key.path=value ...]
//   speclab measure-acceptance EXPERIMENT.yaml --out FILE.yaml [--set ...]
//   speclab bench-decode [--out DIR] [--shapes shipped,1b,8b] [--new-tokens N] ...
//   speclab bench-overhead [--target-shape CONFIG.json] [--drafter-shape CONFIG.json] ...
//   speclab datastore --tokenizer PATH --out FILE TEXT... | --token-files --vocab-size N --out FILE IDS...
//   speclab layer-search --target DIR --text FILE --out FILE.yaml [--windows N ...]
//   speclab report DIR [--group-by KEYS] [--out DIR]
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "experiments/audit_report.h"
#include "experiments/build_info.h"
#include "experiments/datastore_command.h"
#include "experiments/layer_search.h"
#include "experiments/decode_bench.h"
#include "experiments/experiment.h"
#include "experiments/measure_acceptance.h"
#include "experiments/overhead_bench.h"
#include "experiments/plugin_list.h"
#include "experiments/report.h"
#include "experiments/train.h"
#include "framework/plugin_loader.h"

namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  speclab run EXPERIMENT.yaml [--set key.path=value ...] [--out DIR [--overwrite|--resume] [--shard I/N]]\n"
    "              [--trace DIR]\n"
    "  speclab list [--format=tsv] [--plugin LIB.so ...]\n"
    "  speclab audit [--format=tsv] [--seed N] [--plugin LIB.so ...]\n"
    "  speclab train TRAIN.yaml [--set key.path=value ...]\n"
    "  speclab measure-acceptance EXPERIMENT.yaml --out FILE.yaml [--set key.path=value ...]\n"
    "  speclab bench-decode [--out DIR] [--shapes shipped,1b,8b] [--new-tokens N] [--prompt-tokens P]\n"
    "                       [--repeats R] [--device auto|cpu|cuda|cuda:N] [--no-graphs] [--eager-too]\n"
    "  speclab bench-overhead [--target-shape CONFIG.json] [--drafter-shape CONFIG.json] [--gamma G] [--top-k K]\n"
    "                         [--batch-invariant]\n"
    "                         [--verifier NAME] [--tree-builder YAML] [--drafter YAML]\n"
    "                         [--new-tokens N] [--prompt-tokens P] [--prompts K] [--device D] [--out DIR]\n"
    "                         [--trace DIR]\n"
    "  speclab datastore --tokenizer PATH --out FILE.splds TEXT...   (the retrieval drafter's datastore)\n"
    "  speclab layer-search --target DIR --text FILE --out FILE.yaml [--windows N --seq-len N --temperature T\n"
    "      --max-gamma N --device D --seed N]   (the layers a layer_skip drafter keeps)\n"
    "  speclab datastore --token-files --vocab-size N --out FILE.splds IDS.i32...\n"
    "  speclab report RUN_DIR [--group-by KEY,...] [--out DIR]   (tables, SVG plots, HTML of a run or sweep)\n"
    "  speclab --version | COMMAND --help\n";

int Fail(const absl::Status& status) {
  std::cerr << "speclab: " << status.message() << "\n";
  return 1;
}

int Usage(const std::string& problem) {
  std::cerr << "speclab: " << problem << "\n" << kUsage;
  return 2;
}

// Parses "FILE [--set k=v]... [--out DIR] [--overwrite|--resume] [--trace DIR]"
// for run, train and measure-acceptance (--out, --overwrite, --resume and --trace only
// where allowed).
bool ParseConfigArgs(const std::vector<std::string>& args, speclab::RunFlags& flags, bool allow_out,
                     bool allow_trace, std::string& problem) {
  bool out_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    out_given = out_given || (allow_out && (a == "--out" || absl::StartsWith(a, "--out=")));
    if (a == "--overwrite" && allow_trace) {  // run only, as --trace
      flags.overwrite = true;
    } else if (a == "--resume" && allow_trace) {
      flags.resume = true;
    } else if (allow_trace && (a == "--shard" || absl::StartsWith(a, "--shard="))) {
      const std::string value = a == "--shard" ? (i + 1 < args.size() ? args[++i] : "") : a.substr(8);
      const std::vector<std::string> parts = absl::StrSplit(value, '/');
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &flags.shard_index) ||
          !absl::SimpleAtoi(parts[1], &flags.shard_count) || flags.shard_count < 1 || flags.shard_index < 0 ||
          flags.shard_index >= flags.shard_count) {
        problem = absl::StrFormat("--shard '%s': expected I/N with 0 <= I < N", value);
        return false;
      }
    } else if ((a == "--set" || (a == "--out" && allow_out) || (a == "--trace" && allow_trace)) &&
               i + 1 < args.size()) {
      std::string& value = a == "--out" ? flags.out_dir : a == "--trace" ? flags.trace_dir : flags.overrides.emplace_back();
      value = args[++i];
    } else if (absl::StartsWith(a, "--set=")) {
      flags.overrides.push_back(a.substr(6));
    } else if (allow_out && absl::StartsWith(a, "--out=")) {
      flags.out_dir = a.substr(6);
    } else if (allow_trace && absl::StartsWith(a, "--trace=")) {
      flags.trace_dir = a.substr(8);
    } else if (!absl::StartsWith(a, "--") && flags.config_path.empty()) {
      flags.config_path = a;
    } else {
      problem = absl::StrFormat("unexpected argument '%s'", a);
      return false;
    }
  }
  if (out_given && flags.out_dir.empty()) {
    problem = "--out needs a path";
    return false;
  }
  if ((flags.overwrite || flags.resume) && flags.out_dir.empty()) {
    problem = flags.overwrite ? "--overwrite needs --out DIR" : "--resume needs --out DIR";
    return false;
  }
  if (flags.overwrite && flags.resume) {
    problem = "--overwrite and --resume exclude each other";
    return false;
  }
  if (flags.config_path.empty()) problem = "missing config file";
  return !flags.config_path.empty();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "--version" || command == "version") {
    std::cout << speclab::VersionLine() << "\n";
    return 0;
  }
  // COMMAND --help (or -h) anywhere among its arguments: the usage, exit 0.
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
  bool tsv = false;
  uint64_t seed = 1;
  if (command == "list" || command == "audit") {
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--format=tsv") {
        tsv = true;
      } else if (args[i] == "--format=table") {
        tsv = false;
      } else if (command == "audit" && args[i] == "--seed" && i + 1 < args.size() &&
                 absl::SimpleAtoi(args[i + 1], &seed)) {
        ++i;
      } else if ((args[i] == "--plugin" && i + 1 < args.size()) || absl::StartsWith(args[i], "--plugin=")) {
        const std::string path = args[i] == "--plugin" ? args[++i] : args[i].substr(9);
        if (absl::Status loaded = speclab::LoadPlugin(path); !loaded.ok()) return Fail(loaded);
      } else {
        return Usage(absl::StrFormat("unexpected argument '%s'", args[i]));
      }
    }
  }
  if (command == "list") {
    std::cout << speclab::FormatPluginList(tsv);
    return 0;
  }
  if (command == "audit") {
    auto rows = speclab::AuditAllVerifiers(seed);
    if (!rows.ok()) return Fail(rows.status());
    std::cout << speclab::FormatAudit(*rows, tsv);
    for (const auto& row : *rows)
      if (!row.pass) return 1;
    return 0;
  }
  if (command == "run" || command == "train" || command == "measure-acceptance") {
    speclab::RunFlags flags;
    std::string problem;
    if (!ParseConfigArgs(args, flags, command != "train", command == "run", problem)) return Usage(problem);
    absl::Status status;
    if (command == "run") {
      status = speclab::RunExperiment(flags);
    } else if (command == "train") {
      status = speclab::RunTraining(flags.config_path, flags.overrides);
    } else if (flags.out_dir.empty()) {
      return Usage("measure-acceptance needs --out FILE.yaml");
    } else {
      status = speclab::RunMeasureAcceptance(flags.config_path, flags.overrides, flags.out_dir);
    }
    if (absl::IsCancelled(status)) {  // Ctrl-C: the shell's code for SIGINT
      Fail(status);
      return 130;
    }
    return status.ok() ? 0 : Fail(status);
  }
  if (command == "bench-decode") {
    auto flags = speclab::ParseDecodeBenchFlags(args);
    if (!flags.ok()) return Usage(std::string(flags.status().message()));
    absl::Status status = speclab::RunDecodeBench(*flags);
    return status.ok() ? 0 : Fail(status);
  }
  if (command == "bench-overhead") {
    auto flags = speclab::ParseOverheadBenchFlags(args);
    if (!flags.ok()) return Usage(std::string(flags.status().message()));
    absl::Status status = speclab::RunOverheadBench(*flags);
    return status.ok() ? 0 : Fail(status);
  }
  if (command == "layer-search") {
    auto flags = speclab::ParseLayerSearchFlags(args);
    if (!flags.ok()) return Usage(std::string(flags.status().message()));
    absl::Status status = speclab::RunLayerSearch(*flags);
    return status.ok() ? 0 : Fail(status);
  }
  if (command == "datastore") {
    auto flags = speclab::ParseDatastoreFlags(args);
    if (!flags.ok()) return Usage(std::string(flags.status().message()));
    absl::Status status = speclab::RunDatastore(*flags);
    return status.ok() ? 0 : Fail(status);
  }
  if (command == "report") {
    auto flags = speclab::ParseReportFlags(args);
    if (!flags.ok()) return Usage(std::string(flags.status().message()));
    auto written = speclab::WriteReport(*flags);
    if (!written.ok()) return Fail(written.status());
    for (const std::string& path : *written) std::cout << path << "\n";
    return 0;
  }
  return Usage(absl::StrFormat("unknown command '%s'", command));
}
