#include "experiments/overhead_bench.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <iostream>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "drafters/model/model_drafter.h"
#include "experiments/command_flags.h"
#include "experiments/device_trace.h"
#include "experiments/forward_costs.h"
#include "experiments/model_loading.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"
#include "framework/device_transfer.h"
#include "framework/error_text.h"
#include "framework/method.h"
#include "framework/device/device_drafter.h"
#include "framework/device/device_graphs.h"
#include "framework/device/pipelined_steps.h"
#include "framework/device/pipelined_tree.h"
#include "framework/model/llama_model.h"
#include "framework/speculative_decoder.h"
#include "framework/target_features.h"

namespace speclab {
namespace {

absl::StatusOr<std::unique_ptr<LlamaModel>> RandomModel(const ModelConfig& config, c10::Device device,
                                                        int64_t capacity, uint64_t seed) {
  const at::ScalarType dtype = device.is_cuda() ? at::kBFloat16 : at::kFloat;
  return LlamaModel::CreateRandomOnDevice(config, device, dtype, capacity, seed);
}

// Speculative sampling with `verifier` (its host rule and its device form)
// over `tree_builder`'s drafts (a YAML mapping; "" for chains) and a fixed
// gamma, or `length_policy` (a YAML mapping, with its device stop where it
// has one; "" for fixed), drafting with `drafter` (named `drafter_name`; the
// method's other parts come from the registries, as a config would build
// them).
absl::StatusOr<Method> BenchMethod(std::unique_ptr<Drafter> drafter, const std::string& drafter_name, int gamma,
                                   const std::string& verifier, const std::string& tree_builder,
                                   const std::string& length_policy) {
  Method m;
  m.drafter_name = drafter_name;
  m.drafter = std::move(drafter);
  const std::string verifier_yaml = absl::StrCat("{type: ", verifier, "}");
  ASSIGN_OR_RETURN(Options builder, Options::FromString(tree_builder.empty() ? "{type: chain}" : tree_builder,
                                                        "--tree-builder"));
  ASSIGN_OR_RETURN(Options verifier_options, Options::FromString(verifier_yaml, "--verifier"));
  ASSIGN_OR_RETURN(Options policy,
                   length_policy.empty()
                       ? Options::FromString(absl::StrCat("{type: fixed, gamma: ", gamma, "}"), "bench-overhead")
                       : Options::FromString(length_policy, "--length-policy"));
  ASSIGN_OR_RETURN(m.tree_builder_name, builder.GetString("type"));
  m.verifier_name = verifier;
  ASSIGN_OR_RETURN(m.policy_name, policy.GetString("type"));
  if (drafter_name != "model") {
    m.name = absl::StrCat(drafter_name, "_g", gamma, "_", verifier);
  } else if (tree_builder.empty()) {
    m.name = verifier == "rejection" ? absl::StrCat("chain_g", gamma) : absl::StrCat("chain_g", gamma, "_", verifier);
  } else {
    m.name = absl::StrCat(m.tree_builder_name, "_", verifier);
  }
  if (!length_policy.empty()) absl::StrAppend(&m.name, "_", m.policy_name);
  const Options policy_spec = policy;  // the device stop reads the same options
  ASSIGN_OR_RETURN(m.tree_builder, TreeBuilderRegistry::Create(builder, "tree builder"));
  ASSIGN_OR_RETURN(m.verifier, VerifierRegistry::Create(verifier_options, "verifier"));
  ASSIGN_OR_RETURN(m.policy, LengthPolicyRegistry::Create(policy, "length policy"));
  if (m.policy->MaxDraftLengthBound() > gamma)
    return absl::InvalidArgumentError(absl::StrCat("bench-overhead: --length-policy drafts up to ",
                                                   m.policy->MaxDraftLengthBound(), " tokens, more than --gamma ", gamma,
                                                   " (the room the bench makes)"));
  RETURN_IF_ERROR(m.CheckCompatible());
  RETURN_IF_ERROR(AttachDeviceStop(m, policy_spec));
  ASSIGN_OR_RETURN(Options device_options, Options::FromString(verifier_yaml, "--verifier"));
  RETURN_IF_ERROR(AttachDeviceVerifier(m, device_options));
  if (m.device_verifier == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("bench-overhead: --verifier ", verifier,
                                                   " has no device form for these drafts (pipelined steps need one)"));
  return m;
}

// Seconds per step of pipelined steps queued back to back: until the device
// drains, and until the host has queued the last (the host's own work: where
// it is close to the first, the host, not the device, sets the pace).
struct QueuedSeconds {
  double total = 0;
  double host = 0;
  int steps = 0;  // queued: as many as asked for, or as the cache holds
};

// The device alone: up to `steps` pipelined steps queued back to back on
// `prompt` (while the cache holds them: each step's root is bounded as if
// every earlier step accepted everything), none read back, from the first
// launch until the device drains. largest_forward bounds a step's target
// forward (its tokens). Appends the models' forwards to the counts, and the
// runs of the drafter's captured work (DeviceGraphs) to `graph_runs`.
absl::StatusOr<QueuedSeconds> QueuedPipelinedStepSeconds(LanguageModel& target, Method& method,
                                                  const std::vector<int32_t>& prompt, const SamplingParams& sampling,
                                                  int steps, int64_t largest_forward,
                                                  std::map<int64_t, int64_t>& target_forwards,
                                                  std::map<int64_t, int64_t>& draft_forwards,
                                                  std::map<std::string, int64_t>& graph_runs) {
  const c10::Device device = target.device();
  const int64_t fed = static_cast<int64_t>(prompt.size()) - 1;  // the engine's prefill: all but the root
  RETURN_IF_ERROR(target.Truncate(0));
  std::vector<int64_t> head(prompt.begin(), prompt.end() - 1);
  DeviceModel* target_device = DeviceFormOf(target);
  if (target_device == nullptr) return absl::InvalidArgumentError("bench-overhead: the target has no device form");
  RETURN_IF_ERROR(
      target_device->ForwardAt(LongsToDevice(head, device), {.start = LongsToDevice({0}, device), .max_start = 0})
          .status());
  RETURN_IF_ERROR(target.Truncate(fed));
  ASSIGN_OR_RETURN(TargetFeatures prompt_features,
                   GatherFeatures(target, method.drafter->target_features(), at::Tensor()));
  RETURN_IF_ERROR(method.drafter->Reset(prompt, prompt_features));
  at::Generator draft_generator = MakeGenerator(device, 1), verify_generator = MakeGenerator(device, 2);
  const int max_new_tokens = static_cast<int>(target.capacity() - static_cast<int64_t>(prompt.size())) / 2;
  absl::StatusOr<std::unique_ptr<PipelinedSteps>> form =
      PipelinedForm(ChooseEngineForm(target, method, {.sampling = sampling}), target, method, sampling, prompt,
                    prompt_features, max_new_tokens, draft_generator, verify_generator);
  if (!form.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("bench-overhead: the method cannot run pipelined: ", form.status().message()));
  const std::unique_ptr<PipelinedSteps> pipeline = *std::move(form);
  const std::vector<LanguageModel*> drafters = method.drafter->models();
  target.ResetForwardCounts();
  for (LanguageModel* drafter : drafters) drafter->ResetForwardCounts();
  DeviceGraphs* graphs = DraftGraphsOf(*method.drafter);
  if (graphs != nullptr) graphs->ResetRuns();
  LongsToDevice({0}, device).to(at::kCPU);  // the device is idle from here
  const auto start = std::chrono::steady_clock::now();
  at::Tensor last;
  int queued_steps = 0;
  for (int64_t max_root = fed; queued_steps < steps; max_root += pipeline->max_advance(), ++queued_steps) {
    if (queued_steps > 0 && max_root + largest_forward > target.capacity()) break;
    ASSIGN_OR_RETURN(std::optional<at::Tensor> record, pipeline->Queue(fed + queued_steps, max_root));
    if (!record) return absl::InternalError("bench-overhead: the method cannot run pipelined");
    last = *record;
  }
  const auto queued = std::chrono::steady_clock::now();
  last.to(at::kCPU);  // waits for every queued step
  const auto drained = std::chrono::steady_clock::now();
  for (const auto& [n, c] : target.forward_counts()) target_forwards[n] += c;
  for (LanguageModel* drafter : drafters)
    for (const auto& [n, c] : drafter->forward_counts()) draft_forwards[n] += c;
  if (graphs != nullptr)
    for (const auto& [work, runs] : graphs->runs()) graph_runs[work] += runs;
  return QueuedSeconds{.total = std::chrono::duration<double>(drained - start).count() / queued_steps,
                       .host = std::chrono::duration<double>(queued - start).count() / queued_steps,
                       .steps = queued_steps};
}

struct Row {
  std::string method;
  double temperature = 0;
  long tokens = 0, steps = 0;
  double seconds = 0, predicted = 0;
};

// The plugins the flags name, checked before any model is built (random 8B
// weights take minutes to build on a CPU): each is registered and its
// options parse.
absl::Status CheckPluginFlags(const OverheadBenchFlags& flags) {
  ASSIGN_OR_RETURN(Options verifier, Options::FromString(absl::StrCat("{type: ", flags.verifier, "}"), "--verifier"));
  RETURN_IF_ERROR(VerifierRegistry::Create(verifier, "verifier").status());
  ASSIGN_OR_RETURN(Options builder, Options::FromString(flags.tree_builder.empty() ? "{type: chain}" : flags.tree_builder,
                                                        "--tree-builder"));
  RETURN_IF_ERROR(TreeBuilderRegistry::Create(builder, "tree builder").status());
  if (!flags.length_policy.empty()) {
    ASSIGN_OR_RETURN(Options policy, Options::FromString(flags.length_policy, "--length-policy"));
    RETURN_IF_ERROR(LengthPolicyRegistry::Create(policy, "length policy").status());
  }
  if (flags.drafter.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Options drafter, Options::FromString(flags.drafter, "--drafter"));
  ASSIGN_OR_RETURN(std::string type, drafter.GetString("type"));
  if (DrafterRegistry::Find(type) == nullptr) return drafter.Error("type", absl::StrCat("unknown drafter '", type, "'"));
  return absl::OkStatus();
}

absl::Status Run(const OverheadBenchFlags& flags) {
  c10::InferenceMode inference;
  RETURN_IF_ERROR(CheckPluginFlags(flags));
  ASSIGN_OR_RETURN(c10::Device device, ParseDevice(flags.device));
  // The engine checks prompt + emitted + max_new_tokens + tree before each step.
  // Trees advance up to their depth + 1 a step: room for the queued steps too.
  const int64_t capacity =
      flags.prompt_tokens + 2 * flags.new_tokens + 4 * flags.gamma + 64 + (flags.tree_builder.empty() ? 0 : 512);
  ASSIGN_OR_RETURN(ModelConfig target_config, ModelConfig::FromJsonFile(flags.target_shape));
  std::unique_ptr<Drafter> drafter;
  std::string drafter_name = "model";
  LanguageModel* drafter_model = nullptr;  // the random-weight drafter LM, where the drafter is one
  if (flags.drafter.empty()) {
    ASSIGN_OR_RETURN(ModelConfig drafter_config, ModelConfig::FromJsonFile(flags.drafter_shape));
    if (drafter_config.vocab_size != target_config.vocab_size)
      return absl::InvalidArgumentError(absl::StrCat("bench-overhead: the drafter shape has ",
                                                     drafter_config.vocab_size, " tokens, the target ",
                                                     target_config.vocab_size));
    ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> model, RandomModel(drafter_config, device, capacity, 2));
    drafter_model = model.get();
    drafter = std::make_unique<ModelDrafter>(std::move(model));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> target, RandomModel(target_config, device, capacity, 1));
  target->SetBatchInvariant(flags.batch_invariant);
  if (!flags.drafter.empty()) {
    ASSIGN_OR_RETURN(Options spec, Options::FromString(flags.drafter, "--drafter"));
    ASSIGN_OR_RETURN(drafter_name, spec.GetString("type"));
    const DrafterEnvironment environment{.target = target.get(), .device = device,
                                         .dtype = device.is_cuda() ? at::kBFloat16 : at::kFloat, .kv_capacity = capacity, .seed = 2};
    ASSIGN_OR_RETURN(drafter, DrafterRegistry::Create(spec, "drafter", environment));
    if (!drafter->models().empty())
      return absl::InvalidArgumentError("bench-overhead: --drafter is for model-free drafters (prompt_lookup); "
                                        "drafter LMs come from --drafter-shape");
  }
  ASSIGN_OR_RETURN(Method method,
                   BenchMethod(std::move(drafter), drafter_name, flags.gamma, flags.verifier, flags.tree_builder,
                               flags.length_policy));

  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> prompts(flags.prompts);
  for (auto& prompt : prompts) {
    prompt.resize(flags.prompt_tokens);
    for (int32_t& t : prompt) t = 3 + static_cast<int32_t>(rng() % (target->config().vocab_size - 3));
  }
  DecodeOptions options{.max_new_tokens = flags.new_tokens, .eos_token = -1, .seed = 1};
  options.sampling.top_k = flags.top_k;
  // Before the graphs: they return the hidden states they keep.
  RETURN_IF_ERROR(target->KeepHiddenStates(method.drafter->target_features().hidden_layers));
  RETURN_IF_ERROR(target->PrepareForDecoding(2 * flags.gamma + 2));
  if (drafter_model != nullptr) RETURN_IF_ERROR(drafter_model->PrepareForDecoding(2 * flags.gamma + 2));
  {  // warm-up: allocator, kernel selection
    DecodeOptions warm = options;
    warm.max_new_tokens = 16;
    for (double t : {0.0, 1.0}) {
      warm.sampling.temperature = t;
      RETURN_IF_ERROR(GenerateAutoregressive(*target, prompts[0], warm).status());
      for (bool pipeline : {false, true}) {  // their drafter chains are different graphs
        warm.pipeline = pipeline;
        RETURN_IF_ERROR(GenerateSpeculative(*target, method, prompts[0], warm).status());
      }
    }
  }
  // Autoregressive decoding, and the chain step by step and pipelined
  // (DecodeOptions::pipeline).
  struct Runner {
    std::string name;
    std::function<absl::StatusOr<Generation>(const std::vector<int32_t>&, DecodeOptions)> run;
  };
  const std::vector<Runner> runners = {
      {"autoregressive", [&](const std::vector<int32_t>& p, DecodeOptions o) { return GenerateAutoregressive(*target, p, o); }},
      {method.name + ", step by step",
       [&](const std::vector<int32_t>& p, DecodeOptions o) {
         o.pipeline = false;
         return GenerateSpeculative(*target, method, p, o);
       }},
      {method.name + ", pipelined",
       [&](const std::vector<int32_t>& p, DecodeOptions o) {
         o.pipeline = true;
         return GenerateSpeculative(*target, method, p, o);
       }},
  };
  std::vector<Row> rows;
  std::vector<std::vector<Generation>> runs;  // per row, per prompt
  for (double t : {0.0, 1.0}) {
    options.sampling.temperature = t;
    for (const Runner& runner : runners) {
      Row row{.method = runner.name, .temperature = t};
      std::vector<Generation> generations;
      for (const auto& prompt : prompts) {
        ASSIGN_OR_RETURN(Generation g, runner.run(prompt, options));
        row.tokens += static_cast<long>(g.tokens.size());
        row.steps += static_cast<long>(g.steps.size());
        row.seconds += g.decode_seconds;
        generations.push_back(std::move(g));
      }
      rows.push_back(row);
      runs.push_back(std::move(generations));
    }
  }

  if (!flags.trace_dir.empty()) {
    std::filesystem::create_directories(flags.trace_dir);
    for (double t : {0.0, 1.0}) {
      options.sampling.temperature = t;
      for (const Runner& runner : runners) {
        const std::string path = (std::filesystem::path(flags.trace_dir) /
                                  absl::StrFormat("%s_T%g.json", absl::StrReplaceAll(runner.name, {{", ", "_"}, {" ", "_"}}), t))
                                     .string();
        RETURN_IF_ERROR(TraceToFile(path, device.is_cuda(), [&] { return Traced(path, runner.run(prompts[0], options)); }));
      }
    }
  }

  // The pipelined steps' device work alone, per temperature: up to 64 steps
  // queued back to back, as many as the cache holds.
  const int64_t largest_forward = flags.tree_builder.empty() ? flags.gamma + 1 : PipelinedTree::kMaxTreeNodes;
  std::map<double, QueuedSeconds> queued_seconds;
  std::map<double, std::pair<std::map<int64_t, int64_t>, std::map<int64_t, int64_t>>> queued_forwards;
  std::map<double, std::map<std::string, int64_t>> queued_graph_runs;
  for (double t : {0.0, 1.0}) {
    SamplingParams sampling = options.sampling;
    sampling.temperature = t;
    auto& [target_forwards, draft_forwards] = queued_forwards[t];
    std::map<std::string, int64_t>& graph_runs = queued_graph_runs[t];
    RETURN_IF_ERROR(QueuedPipelinedStepSeconds(*target, method, prompts[0], sampling, 4, largest_forward,
                                               target_forwards, draft_forwards, graph_runs)
                        .status());  // warm-up
    target_forwards.clear();
    draft_forwards.clear();
    graph_runs.clear();
    ASSIGN_OR_RETURN(queued_seconds[t],
                     QueuedPipelinedStepSeconds(*target, method, prompts[0], sampling, 64, largest_forward,
                                                target_forwards, draft_forwards, graph_runs));
  }

  // Price the forwards at costs measured on the same models.
  std::set<int64_t> target_counts, draft_counts;
  for (const auto& generations : runs)
    for (const Generation& g : generations) {
      for (const auto& [n, c] : g.target_forwards) target_counts.insert(n);
      for (const auto& [n, c] : g.draft_forwards) draft_counts.insert(n);
    }
  const int64_t context = flags.prompt_tokens + flags.new_tokens / 2;
  ASSIGN_OR_RETURN(auto target_costs, MeasureForwardCosts(*target, target_counts, context, 10));
  std::map<int64_t, double> draft_costs, draft_waited;  // none for a model-free drafter
  if (drafter_model != nullptr) {
    ASSIGN_OR_RETURN(draft_costs, MeasureForwardCosts(*drafter_model, draft_counts, context, 10));
    ASSIGN_OR_RETURN(draft_waited, MeasureForwardCosts(*drafter_model, {1}, context, 10, /*synchronize_each=*/true));
  }
  // The same forwards, each waited for: what a forward costs when the host
  // must see its result before launching the next.
  ASSIGN_OR_RETURN(auto target_waited, MeasureForwardCosts(*target, {1}, context, 10, /*synchronize_each=*/true));
  // The drafter's own device work besides forwards (heads' graphs), priced
  // per run of each work as the forwards are: replayed on the device's clock.
  std::map<std::string, double> graph_costs;
  DeviceGraphs* graphs = DraftGraphsOf(*method.drafter);
  auto graph_seconds = [&](const std::map<std::string, int64_t>& graph_runs) -> absl::StatusOr<double> {
    if (graphs == nullptr) return 0.0;  // runs are counted only where the drafter keeps captured work
    return GraphRunSeconds(*graphs, graph_runs, 10, graph_costs);
  };
  for (size_t r = 0; r < rows.size(); ++r) {
    for (const Generation& g : runs[r]) {
      ASSIGN_OR_RETURN(double target_seconds, PredictSeconds(g.target_forwards, target_costs));
      ASSIGN_OR_RETURN(double draft_seconds, PredictSeconds(g.draft_forwards, draft_costs));
      ASSIGN_OR_RETURN(double drafting, graph_seconds(g.draft_graph_runs));
      rows[r].predicted += target_seconds + draft_seconds + drafting;
    }
  }

  std::string report = absl::StrFormat(
      "## bench-overhead: target %s, drafter %s (random weights), %s, %d prompts x %d new tokens\n\n"
      "Forward costs (ms): target n=1 %.3f",
      flags.target_shape, flags.drafter.empty() ? flags.drafter_shape : flags.drafter, device.str(), flags.prompts,
      flags.new_tokens,
      1e3 * target_costs[1]);
  if (target_costs.count(flags.gamma + 1)) absl::StrAppendFormat(&report, ", target n=%d %.3f", flags.gamma + 1,
                                                                 1e3 * target_costs[flags.gamma + 1]);
  if (draft_costs.count(1)) absl::StrAppendFormat(&report, ", drafter n=1 %.3f", 1e3 * draft_costs[1]);
  absl::StrAppendFormat(&report,
                        "\n\nLaunch and synchronisation latency (n=1, a synchronisation after each forward, minus "
                        "back to back): target %.1f us",
                        1e6 * (target_waited[1] - target_costs[1]));
  if (draft_costs.count(1) && draft_waited.count(1))
    absl::StrAppendFormat(&report, ", drafter %.1f us", 1e6 * (draft_waited[1] - draft_costs[1]));
  if (!graph_costs.empty()) {
    absl::StrAppendFormat(&report, "\n\nThe drafter's captured work (DeviceGraphs), priced like the forwards, us a run:");
    for (const auto& [work, seconds] : graph_costs)
      absl::StrAppendFormat(&report, "\n- %s: %.1f", work, 1e6 * seconds);
  }
  report +=
      "\n\n| method | temperature | tokens/s | steps | tau | measured ms | predicted ms | overhead us/step |\n"
      "|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    absl::StrAppendFormat(&report, "| %s | %g | %.1f | %d | %.2f | %.1f | %.1f | %.1f |\n", r.method,
                          r.temperature, r.tokens / r.seconds, r.steps, static_cast<double>(r.tokens) / r.steps,
                          1e3 * r.seconds, 1e3 * r.predicted, 1e6 * (r.seconds - r.predicted) / r.steps);
  }
  absl::StrAppendFormat(
      &report,
      "\nThe pipelined steps' device work alone (up to 64 steps queued back to back, as many as the cache holds, "
      "nothing read back): the device time of a step beyond its forwards and the drafter's captured work (probabilities, "
      "sampling, verification and bookkeeping kernels), and the pipelined loop's overhead minus that: host time the device waited for. Host "
      "ms/step is the host's time to queue a step: where it nears the device's, the host sets the pace and the "
      "device's share is an upper bound.\n\n"
      "| temperature | steps queued | device ms/step | host ms/step (queueing) | forwards (and drafter graphs) ms/step | "
      "device work beyond them us/step | pipelined overhead us/step | host time not hidden us/step |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (size_t r = 0; r < rows.size(); ++r) {
    if (runners[r % runners.size()].name != method.name + ", pipelined") continue;
    const double t = rows[r].temperature;
    const auto& [target_forwards, draft_forwards] = queued_forwards[t];
    ASSIGN_OR_RETURN(double target_seconds, PredictSeconds(target_forwards, target_costs));
    ASSIGN_OR_RETURN(double draft_seconds, PredictSeconds(draft_forwards, draft_costs));
    ASSIGN_OR_RETURN(double drafting, graph_seconds(queued_graph_runs[t]));
    const double forwards = (target_seconds + draft_seconds + drafting) / queued_seconds[t].steps;
    const double beyond = queued_seconds[t].total - forwards;
    const double overhead = (rows[r].seconds - rows[r].predicted) / rows[r].steps;
    absl::StrAppendFormat(&report, "| %g | %d | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f |\n", t,
                          queued_seconds[t].steps, 1e3 * queued_seconds[t].total, 1e3 * queued_seconds[t].host,
                          1e3 * forwards, 1e6 * beyond, 1e6 * overhead, 1e6 * (overhead - beyond));
  }
  std::cout << report << std::flush;
  if (!flags.out_dir.empty()) {
    std::filesystem::create_directories(flags.out_dir);
    std::ofstream(std::filesystem::path(flags.out_dir) / "overhead_bench.md") << report;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OverheadBenchFlags> ParseOverheadBenchFlags(const std::vector<std::string>& args) {
  OverheadBenchFlags flags;
  auto text = [](std::string& into) {
    return [&into](const std::string& value) {
      into = value;
      return absl::OkStatus();
    };
  };
  const std::vector<CommandFlag> table = {
      {"--target-shape", "CONFIG.json", text(flags.target_shape)},
      {"--drafter-shape", "CONFIG.json", text(flags.drafter_shape)},
      {"--gamma", "G", PositiveInto("--gamma", flags.gamma, 32)},
      {"--top-k", "K", PositiveInto("--top-k", flags.top_k, 1 << 20)},
      {"--batch-invariant", nullptr,
       [&](const std::string&) {
         flags.batch_invariant = true;
         return absl::OkStatus();
       }},
      {"--verifier", "NAME", text(flags.verifier)},
      {"--tree-builder", "YAML", text(flags.tree_builder)},
      {"--drafter", "YAML", text(flags.drafter)},
      {"--length-policy", "YAML", text(flags.length_policy)},
      {"--new-tokens", "N", PositiveInto("--new-tokens", flags.new_tokens, 1 << 16)},
      {"--prompt-tokens", "P", PositiveInto("--prompt-tokens", flags.prompt_tokens, 1 << 16)},
      {"--prompts", "K", PositiveInto("--prompts", flags.prompts, 1 << 10)},
      {"--device", "auto|cpu|cuda|cuda:N", text(flags.device)},
      {"--out", "DIR", text(flags.out_dir)},
      {"--trace", "DIR", text(flags.trace_dir)},
  };
  RETURN_IF_ERROR(ApplyCommandFlags(args, table));
  return flags;
}

absl::Status RunOverheadBench(const OverheadBenchFlags& flags) {
  try {
    return Run(flags);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bench-overhead: ", ErrorText(e)));
  }
}

}  // namespace speclab
