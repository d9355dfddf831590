#include "experiments/experiment.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/device_trace.h"
#include "experiments/build_info.h"
#include "experiments/experiment_loading.h"
#include "experiments/forward_costs.h"
#include "experiments/progress.h"
#include "experiments/prompt_set.h"
#include "experiments/records/step_records.h"
#include "experiments/run_journal.h"
#include "experiments/sweep_runner.h"
#include "experiments/summary.h"
#include "framework/core/file_util.h"
#include "framework/core/json.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/tokenizers/tokenizer.h"
#include "framework/method.h"
#include "framework/model/llama_model.h"
#include "framework/device/device_drafter.h"
#include "framework/device/device_graphs.h"
#include "framework/device/pipelined_steps.h"
#include "framework/speculative_decoder.h"

namespace speclab {
namespace {

// Runs `generate` `repeats` times (one seed: the same tokens) and keeps the
// run of median decode time, so that a host hiccup in one run moves no row.
absl::StatusOr<Generation> MedianOfRepeats(int repeats, const std::function<absl::StatusOr<Generation>()>& generate) {
  std::vector<Generation> runs;
  for (int r = 0; r < repeats; ++r) {
    ASSIGN_OR_RETURN(Generation g, generate());
    runs.push_back(std::move(g));
  }
  std::nth_element(runs.begin(), runs.begin() + repeats / 2, runs.end(),
                   [](const Generation& a, const Generation& b) { return a.decode_seconds < b.decode_seconds; });
  return std::move(runs[repeats / 2]);
}

// What git_revision.txt records: the binary's own revision (embedded at
// build time, not the repository the shell stands in), and whether its
// build tree had uncommitted changes.
std::string RevisionRecord() {
  return absl::StrCat(BuildRevision(), "\ndirty: ", BuildTreeWasDirty() ? "true" : "false", "\n");
}

// What a run writes into its --out folder (summary.csv last).
constexpr const char* kOutputFiles[] = {"config.resolved.yaml", "git_revision.txt", RunJournal::kFileName, "steps.pb",
                                        "outputs.jsonl", "prompts.jsonl", "summary.csv"};

// Before any decoding: the folder exists or can be made and can be written;
// it holds no earlier run unless the user asked to replace it (--overwrite)
// or to finish it (--resume, with the same resolved config). Then the run's
// config and revision are written first, so a killed run is recognisable.
absl::Status PrepareOutputFolder(const RunFlags& flags, const std::string& resolved_config) {
  const std::filesystem::path dir(flags.out_dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat("--out ", flags.out_dir, ": cannot create: ",
                                                             error.message()));
  if (!std::filesystem::is_directory(dir))
    return absl::InvalidArgumentError(absl::StrCat("--out ", flags.out_dir, ": not a folder"));
  const bool finished = std::filesystem::exists(dir / "summary.csv");
  const bool started = std::filesystem::exists(dir / "config.resolved.yaml") ||
                       std::filesystem::exists(dir / RunJournal::kFileName);
  if (flags.overwrite) {
    for (const char* file : kOutputFiles) std::filesystem::remove(dir / file, error);
  } else if (finished) {
    return absl::AlreadyExistsError(absl::StrCat("--out ", flags.out_dir, " holds a finished run (summary.csv): ",
                                                 "choose another folder, or pass --overwrite to replace it"));
  } else if (started && !flags.resume) {
    return absl::AlreadyExistsError(absl::StrCat("--out ", flags.out_dir, " holds an unfinished run (",
                                                 RunJournal::kFileName, "): pass --resume to finish it, or ",
                                                 "--overwrite to replace it"));
  } else if (started) {
    std::ifstream in(dir / "config.resolved.yaml");
    std::stringstream earlier;
    earlier << in.rdbuf();
    if (earlier.str() != resolved_config)
      return absl::FailedPreconditionError(absl::StrCat(
          "--resume: ", (dir / "config.resolved.yaml").string(), " differs from this run's resolved config ",
          "(another config or other --set values): a resumed run must decode what the killed one did"));
  }
  const std::filesystem::path probe = dir / ".speclab_write_check";
  if (!WriteFileAtomically(probe, "").ok())
    return absl::PermissionDeniedError(absl::StrCat("--out ", flags.out_dir, ": cannot write there"));
  std::filesystem::remove(probe, error);
  RETURN_IF_ERROR(WriteFileAtomically(dir / "config.resolved.yaml", resolved_config));
  return WriteFileAtomically(dir / "git_revision.txt", RevisionRecord());
}

absl::Status WriteOutputs(const std::string& dir, const std::vector<RunRecord>& records,
                          const std::vector<SummaryRow>& rows, const Tokenizer& tokenizer) {
  const std::filesystem::path folder(dir);
  std::vector<StepRecordRow> steps;
  std::string outputs;
  for (const RunRecord& r : records) {
    for (size_t i = 0; i < r.generation.steps.size(); ++i) {
      const StepStats& s = r.generation.steps[i];
      steps.push_back({r.method, r.task, r.prompt_id, r.temperature, static_cast<int>(i), s.tree_nodes,
                       s.longest_path, s.accepted, s.draft_seconds, s.verify_seconds, s.other_seconds});
    }
    auto text = tokenizer.Decode(r.generation.tokens);
    if (!text.ok())
      return absl::Status(text.status().code(), absl::StrCat("outputs.jsonl: method ", r.method, ", prompt ",
                                                              r.prompt_id, ": ", text.status().message()));
    absl::StrAppendFormat(
        &outputs,
        "{\"method\": \"%s\", \"task\": \"%s\", \"id\": \"%s\", \"temperature\": %g, \"engine_form\": \"%s\", "
        "\"text\": \"%s\", \"tokens\": [%s]}\n",
        JsonEscape(r.method), JsonEscape(r.task), JsonEscape(r.prompt_id), r.temperature,
        JsonEscape(r.generation.engine_form), JsonEscape(*text), absl::StrJoin(r.generation.tokens, ", "));
  }
  RETURN_IF_ERROR(WriteFileAtomically(folder / "outputs.jsonl", outputs));
  RETURN_IF_ERROR(WriteStepRecords((folder / "steps.pb.partial").string(), steps));
  RETURN_IF_ERROR(MoveInPlace(folder / "steps.pb.partial", folder / "steps.pb"));
  RETURN_IF_ERROR(WriteSummaryCsv((folder / "summary.csv.partial").string(), rows));
  return MoveInPlace(folder / "summary.csv.partial", folder / "summary.csv");
}

// The prompts as the models saw them, for tools that must feed the same ids
// (scripts/hf_bench.py).
absl::Status WritePromptIds(const std::string& dir, const std::vector<Prompt>& prompts,
                            const std::vector<std::vector<int32_t>>& encoded) {
  std::string out;
  for (size_t i = 0; i < prompts.size(); ++i)
    absl::StrAppendFormat(&out, "{\"task\": \"%s\", \"id\": \"%s\", \"ids\": [%s]}\n", JsonEscape(prompts[i].task),
                          JsonEscape(prompts[i].id), absl::StrJoin(encoded[i], ", "));
  return WriteFileAtomically(std::filesystem::path(dir) / "prompts.jsonl", out);
}

void AddCounts(const std::map<int64_t, int64_t>& counts, std::set<int64_t>& into) {
  for (const auto& [tokens, count] : counts) into.insert(tokens);
}

// The forwards a run counted for model `i` of a drafter of `models`: the sum
// where there is one (journals of older runs keep only it), else the model's
// own counts; null where the run did not count them apart.
const std::map<int64_t, int64_t>* DraftCountsOf(const Generation& g, size_t i, size_t models) {
  if (models == 1) return &g.draft_forwards;
  return g.draft_forwards_by_model.size() == models ? &g.draft_forwards_by_model[i] : nullptr;
}

// Prices every run's forwards at costs measured on its own models, at the
// mean context length the runs decoded at.
absl::Status PredictRunTimes(Experiment& e, const std::vector<std::vector<int32_t>>& encoded,
                             std::vector<RunRecord>& records) {
  double prompt_tokens = 0;
  for (const auto& ids : encoded) prompt_tokens += static_cast<double>(ids.size());
  const int64_t context = static_cast<int64_t>(prompt_tokens / encoded.size() + e.max_new_tokens / 2.0);
  constexpr int kRepeats = 10;
  std::set<int64_t> target_counts;
  for (const RunRecord& r : records) AddCounts(r.generation.target_forwards, target_counts);
  ASSIGN_OR_RETURN(auto target_costs, MeasureForwardCosts(*e.target, target_counts, context, kRepeats));
  // By method, then by drafter model (Drafter::models()' order); absent: no prediction.
  std::map<std::string, std::vector<std::map<int64_t, double>>> draft_costs;
  for (Method& m : e.methods) {
    const std::vector<LanguageModel*> models = m.drafter->models();
    std::vector<std::set<int64_t>> counts(models.size());
    bool counted = true;  // every run counted each model's forwards
    for (const RunRecord& r : records) {
      if (r.method != m.name) continue;
      for (size_t i = 0; i < models.size(); ++i) {
        const std::map<int64_t, int64_t>* own = DraftCountsOf(r.generation, i, models.size());
        counted = counted && own != nullptr;
        if (own != nullptr) AddCounts(*own, counts[i]);
      }
    }
    if (!counted) continue;
    std::vector<std::map<int64_t, double>>& costs = draft_costs[m.name];
    for (size_t i = 0; i < models.size(); ++i) {
      costs.emplace_back();
      if (!counts[i].empty()) {
        ASSIGN_OR_RETURN(costs.back(), MeasureForwardCosts(*models[i], counts[i], context, kRepeats));
      }
    }
  }
  // The drafters' own device work besides forwards (heads, picks), priced
  // per run of each captured work.
  std::map<std::string, DeviceGraphs*> graphs;                       // by method
  std::map<std::string, std::map<std::string, double>> graph_prices;  // by method, then work
  for (Method& m : e.methods) graphs[m.name] = DraftGraphsOf(*m.drafter);
  for (RunRecord& r : records) {
    ASSIGN_OR_RETURN(double seconds, PredictSeconds(r.generation.target_forwards, target_costs));
    if (r.method != kBaseline) {
      auto it = draft_costs.find(r.method);
      if (it == draft_costs.end()) continue;
      for (size_t i = 0; i < it->second.size(); ++i) {
        ASSIGN_OR_RETURN(double draft_seconds,
                         PredictSeconds(*DraftCountsOf(r.generation, i, it->second.size()), it->second[i]));
        seconds += draft_seconds;
      }
      if (!r.generation.draft_graph_runs.empty()) {
        // No prediction rather than one without its drafting: a drafter
        // without captured work here, or a work only a journaled (resumed)
        // run drafted with (NotFound), has no price.
        DeviceGraphs* own = graphs[r.method];
        if (own == nullptr) continue;
        absl::StatusOr<double> drafting =
            GraphRunSeconds(*own, r.generation.draft_graph_runs, kRepeats, graph_prices[r.method]);
        if (absl::IsNotFound(drafting.status())) continue;
        if (!drafting.ok()) return drafting.status();
        seconds += *drafting;
      }
    }
    r.predicted_seconds = seconds;
  }
  return absl::OkStatus();
}

// One untimed generation of the baseline and of each method per temperature,
// on the first prompt, each under the profiler.
absl::Status TraceMethods(Experiment& e, const std::vector<int32_t>& prompt, DecodeOptions options,
                          const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrCat(dir, ": cannot create: ", error.message()));
  const bool cuda = e.target->device().is_cuda();
  for (double temperature : e.temperatures) {
    options.sampling.temperature = temperature;
    auto path = [&](const std::string& method) {
      return (std::filesystem::path(dir) / absl::StrFormat("%s_T%g.json", method, temperature)).string();
    };
    RETURN_IF_ERROR(TraceToFile(path(kBaseline), cuda, [&] {
      return Traced(path(kBaseline), GenerateAutoregressive(*e.target, prompt, options));
    }));
    for (Method& m : e.methods)
      RETURN_IF_ERROR(TraceToFile(path(m.name), cuda, [&] {
        return Traced(path(m.name), GenerateSpeculative(*e.target, m, prompt, options));
      }));
  }
  std::cerr << "speclab: wrote traces to " << dir << "\n";
  return absl::OkStatus();
}


// Forwards up to this many tokens (trees, drafter levels) run as CUDA graphs.
constexpr int64_t kMaxPreparedTokens = 128;

// A moving length's chains, every length it may choose drafted once at the
// warm-up: each length is its own drafter graph (per sampling setting), which
// would otherwise be captured at its first use inside a timed generation. The
// method drafts with a fixed policy of each length in turn, in the engine
// form its own policy gets.
absl::Status WarmEveryLength(LanguageModel& target, Method& m, absl::Span<const int32_t> prompt,
                             const DecodeOptions& options) {
  if (m.policy->length_is_fixed() || m.policy->wants_progress()) return absl::OkStatus();
  DecodeOptions warm = options;
  warm.pipeline = options.pipeline && ChooseEngineForm(target, m, options).pipelined();
  const int bound = m.policy->MaxDraftLengthBound();
  std::unique_ptr<DraftLengthPolicy> policy = std::move(m.policy);
  absl::Status status = absl::OkStatus();
  for (int gamma = 1; gamma <= bound && status.ok(); ++gamma) {
    absl::StatusOr<Options> fixed = Options::FromString(absl::StrCat("{type: fixed, gamma: ", gamma, "}"), "warm-up");
    absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> length =
        fixed.ok() ? LengthPolicyRegistry::Create(*fixed, "length policy") : fixed.status();
    if (!length.ok()) {
      status = length.status();
      break;
    }
    m.policy = *std::move(length);
    status = GenerateSpeculative(target, m, prompt, warm).status();
  }
  m.policy = std::move(policy);
  return status;
}

}  // namespace

absl::Status RunExperiment(const RunFlags& flags) {
  ASSIGN_OR_RETURN(Options root, Options::FromFileWithOverrides(flags.config_path, flags.overrides));
  if (root.Has("sweep")) return RunSweep(root, flags);
  if (flags.shard_count != 1) return absl::InvalidArgumentError("--shard splits a sweep: the config has no sweep:");
  return RunResolvedExperiment(root, flags);
}

absl::Status RunResolvedExperiment(Options root, const RunFlags& flags) {
  ASSIGN_OR_RETURN(Experiment e, LoadExperiment(root));
  std::optional<RunJournal> journal;
  if (!flags.out_dir.empty()) {
    RETURN_IF_ERROR(PrepareOutputFolder(flags, root.Dump() + "\n"));
    ASSIGN_OR_RETURN(journal, RunJournal::Open(flags.out_dir, flags.resume));
    if (journal->finished_generations() > 0)
      std::cerr << absl::StrFormat("speclab: resuming: %d of %d generations are done\n",
                                   journal->finished_generations(),
                                   e.prompts.size() * e.temperatures.size() * (e.methods.size() + 1));
  } else if (flags.resume) {
    return absl::InvalidArgumentError("--resume needs --out DIR");
  }
  std::cerr << absl::StrFormat("speclab: experiment '%s': %d prompts, %d methods, target on %s\n", e.name,
                               e.prompts.size(), e.methods.size(), e.target->device().str());

  ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> encoded, EncodePrompts(e));
  DecodeOptions options{.sampling = e.sampling, .max_new_tokens = e.max_new_tokens,
                        .eos_token = e.stop_at_eos ? e.tokenizer->eos_id() : -1, .seed = e.seed,
                        .verify_on_device = e.verify_on_device, .pipeline = e.pipeline};
  // How each method's steps run, decided once.
  for (Method& m : e.methods)
    std::cerr << absl::StrFormat("speclab: method '%s' runs %s\n", m.name, ChooseEngineForm(*e.target, m, options).Describe());
  // One-time work first (CUDA graphs for every forward shape), then a warm-up
  // (allocator, kernels, caches), so that no measured run pays for either.
  RETURN_IF_ERROR(e.target->PrepareForDecoding(kMaxPreparedTokens));
  for (Method& m : e.methods)
    for (LanguageModel* model : m.drafter->models()) RETURN_IF_ERROR(model->PrepareForDecoding(kMaxPreparedTokens));
  // At every temperature: drafters capture their chain graphs per sampling
  // setting (LanguageModel::ForwardChain).
  for (double temperature : e.temperatures) {
    DecodeOptions warm = options;
    warm.max_new_tokens = 8;
    warm.sampling.temperature = temperature;
    RETURN_IF_ERROR(GenerateAutoregressive(*e.target, encoded.front(), warm).status());
    for (Method& m : e.methods) {
      RETURN_IF_ERROR(GenerateSpeculative(*e.target, m, encoded.front(), warm).status());
      RETURN_IF_ERROR(WarmEveryLength(*e.target, m, encoded.front(), warm));
    }
  }

  // Graph captures during timed decoding would distort its timings: count them.
  auto captures = [&] {
    int64_t total = e.target->graph_captures();
    for (Method& m : e.methods)
      for (LanguageModel* model : m.drafter->models())
        if (auto* llama = dynamic_cast<LlamaModel*>(model)) total += llama->graph_captures();
    return total;
  };
  const int64_t prepared_captures = captures();
  std::vector<RunRecord> records;
  const int units = static_cast<int>(e.temperatures.size() * e.prompts.size());
  int units_done = 0;
  Progress progress(units, e.temperatures.size() > 1 ? "prompts x temperatures" : "prompts");
  StopOnInterrupt();
  // Ctrl-C: stop between generations, every finished one kept.
  auto stopped = [&] {
    progress.Finish();
    return absl::CancelledError(
        journal ? absl::StrFormat("interrupted: %d finished generations are kept in %s/%s; the same command with "
                                  "--resume finishes the run",
                                  journal->finished_generations(), flags.out_dir, RunJournal::kFileName)
                : "interrupted (without --out nothing is kept)");
  };
  for (double temperature : e.temperatures) {
    options.sampling.temperature = temperature;
    for (size_t i = 0; i < e.prompts.size(); ++i) {
      const Prompt& prompt = e.prompts[i];
      // Generations the journal holds (a resumed run) are read back, not decoded.
      auto journaled = [&](const std::string& method) {
        return journal ? journal->Find(temperature, prompt.id, method) : nullptr;
      };
      bool all_journaled = journaled(kBaseline) != nullptr;
      for (const Method& m : e.methods) all_journaled = all_journaled && journaled(m.name) != nullptr;
      const std::string where = absl::StrFormat("T=%g, prompt %s (%s)", temperature, prompt.id, prompt.task);
      if (!all_journaled) {  // a prompt read back whole neither stops nor shows
        if (Interrupted()) return stopped();
        progress.Update(units_done, where);
      }
      options.seed = e.seed + i;
      if (const RunRecord* base = journaled(kBaseline)) {
        records.push_back(*base);
      } else {
        ASSIGN_OR_RETURN(Generation generation, MedianOfRepeats(e.repeats, [&] {
                           return GenerateAutoregressive(*e.target, encoded[i], options);
                         }));
        records.push_back({kBaseline, prompt.task, prompt.id, temperature, std::move(generation)});
        if (journal) RETURN_IF_ERROR(journal->Append(records.back()));
      }
      const std::vector<int32_t> base_tokens = records.back().generation.tokens;
      for (Method& m : e.methods) {
        if (const RunRecord* done = journaled(m.name)) {
          records.push_back(*done);
          continue;
        }
        if (Interrupted()) return stopped();
        progress.Update(units_done, absl::StrCat(where, ", method ", m.name));
        auto generation =
            MedianOfRepeats(e.repeats, [&] { return GenerateSpeculative(*e.target, m, encoded[i], options); });
        if (!generation.ok())
          return absl::Status(generation.status().code(),
                              absl::StrCat("prompt ", prompt.id, ": ", generation.status().message()));
        RunRecord record{m.name, prompt.task, prompt.id, temperature, *std::move(generation)};
        if (temperature == 0 && m.lossless()) record.greedy_match = record.generation.tokens == base_tokens;
        if (journal) RETURN_IF_ERROR(journal->Append(record));
        records.push_back(std::move(record));
      }
      ++units_done;
    }
  }
  progress.Update(units_done, "decoded");
  progress.Finish();
  if (captures() > prepared_captures)
    std::cerr << "speclab: warning: " << captures() - prepared_captures
              << " CUDA graphs were captured during timed decoding (their cost is in the timings)\n";
  if (!flags.trace_dir.empty()) RETURN_IF_ERROR(TraceMethods(e, encoded.front(), options, flags.trace_dir));
  std::cerr << "speclab: measuring forward costs for the predicted speedups\n";
  RETURN_IF_ERROR(PredictRunTimes(e, encoded, records));
  std::vector<SummaryRow> rows = Summarize(records, kBaseline);
  const bool on_cpu = e.target->device().is_cpu();
  for (SummaryRow& row : rows) row.has_overhead = !on_cpu;
  std::cout << "## " << e.name << " (target on " << e.target->device().str() << ")\n" << MarkdownTables(rows);
  if (on_cpu) std::cout << "\n" << kCpuOverheadNote << "\n";
  std::cout << EngineForms(records, rows, kBaseline);
  std::cout << DraftedLengths(records, kBaseline);
  std::cout << std::flush;
  if (!flags.out_dir.empty()) {
    RETURN_IF_ERROR(WritePromptIds(flags.out_dir, e.prompts, encoded));
    RETURN_IF_ERROR(WriteOutputs(flags.out_dir, records, rows, *e.tokenizer));
    std::cerr << "speclab: wrote " << flags.out_dir << "\n";
  }
  return absl::OkStatus();
}

}  // namespace speclab
