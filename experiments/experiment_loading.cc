#include "experiments/experiment_loading.h"

#include <ATen/Parallel.h>

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "experiments/model_loading.h"
#include "framework/core/status_macros.h"
#include "framework/plugin_loader.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {

namespace {

// A tokenizer of another model would make every output text wrong while the
// metrics look normal: its vocabulary must fit the target's embedding (which
// may be padded beyond it), and its BOS must be the one config.json names,
// where both name one. (EOS is not compared: chat models' configs often name
// another end token than their tokenizers.)
absl::Status CheckTokenizerFitsTarget(const Tokenizer& tokenizer, const ModelConfig& config, const Options& models) {
  if (tokenizer.vocab_size() > config.vocab_size)
    return models.Error("tokenizer", absl::StrCat("the tokenizer has ", tokenizer.vocab_size(),
                                                  " tokens, the target's vocabulary ", config.vocab_size,
                                                  ": it is another model's tokenizer"));
  auto check = [&](const char* name, int64_t config_id, int64_t tokenizer_id) {
    if (config_id < 0 || tokenizer_id < 0 || config_id == tokenizer_id) return absl::OkStatus();
    return models.Error("tokenizer", absl::StrCat("the tokenizer's ", name, " is ", tokenizer_id, ", the target's ",
                                                  "config.json says ", config_id, ": it is another model's tokenizer"));
  };
  // Not EOS: instruct models' config.json names the turn's end (Llama 3.1's
  // 128009), their tokenizer the text's (128001), and both are right.
  return check("BOS", config.bos_token_id, tokenizer.bos_id());
}

}  // namespace

absl::StatusOr<Experiment> LoadExperiment(Options& root, std::optional<int> first_methods) {
  Experiment e;
  // Plugin libraries first (paths relative to the experiment's file): the
  // methods below may name what they register.
  ASSIGN_OR_RETURN(std::vector<std::string> plugins, root.GetStringList("plugins", std::vector<std::string>{}));
  for (const std::string& plugin : plugins) {
    if (absl::Status loaded = LoadPlugin(root.ResolvePath(plugin)); !loaded.ok())
      return root.Error("plugins", std::string(loaded.message()));
  }
  ASSIGN_OR_RETURN(e.name, root.GetString("name", "experiment"));

  ASSIGN_OR_RETURN(Options models, root.GetMap("models"));
  ASSIGN_OR_RETURN(std::string target_path, models.GetString("target"));
  target_path = models.ResolvePath(target_path);
  ASSIGN_OR_RETURN(std::string tokenizer_path,
                   models.GetString("tokenizer", (std::filesystem::path(target_path) / "tokenizer.model").string()));
  ASSIGN_OR_RETURN(std::string device_name, models.GetString("device", "auto"));
  ASSIGN_OR_RETURN(std::string dtype_name, models.GetString("dtype", "auto"));
  ASSIGN_OR_RETURN(int64_t kv_capacity, models.GetInt("kv_capacity", 2048));
  ASSIGN_OR_RETURN(int64_t threads, models.GetInt("cpu_threads", 0));
  ASSIGN_OR_RETURN(bool batch_invariant, models.GetBool("batch_invariant", false));
  RETURN_IF_ERROR(models.CheckAllUsed());
  auto device = ParseDevice(device_name);
  if (!device.ok()) return models.Error("device", std::string(device.status().message()));
  auto dtype = ParseDtype(dtype_name, *device);
  if (!dtype.ok()) return models.Error("dtype", std::string(dtype.status().message()));
  if (threads < 0 || threads > 1024) return models.Error("cpu_threads", "expected an integer in [0, 1024] (0: LibTorch's)");
  if (threads > 0) at::set_num_threads(static_cast<int>(threads));
  auto target = LlamaModel::Load(target_path, *device, *dtype, kv_capacity);
  if (!target.ok()) return models.Error("target", std::string(target.status().message()));
  e.target = *std::move(target);
  e.target->SetBatchInvariant(batch_invariant);
  auto tokenizer = LoadTokenizer(models.ResolvePath(tokenizer_path));
  if (!tokenizer.ok()) return models.Error("tokenizer", std::string(tokenizer.status().message()));
  e.tokenizer = *std::move(tokenizer);
  RETURN_IF_ERROR(CheckTokenizerFitsTarget(*e.tokenizer, e.target->config(), models));

  ASSIGN_OR_RETURN(Options prompts, root.GetMap("prompts"));
  ASSIGN_OR_RETURN(std::vector<std::string> files, prompts.GetStringList("files"));
  ASSIGN_OR_RETURN(int64_t per_task, prompts.GetInt("per_task", 0));
  RETURN_IF_ERROR(prompts.CheckAllUsed());
  if (files.empty()) return prompts.Error("files", "expected at least one prompt file");
  if (per_task < 0 || per_task > (int64_t{1} << 20))
    return prompts.Error("per_task", "expected an integer in [0, 1048576] (0: every prompt)");
  std::map<std::string, std::string> file_of_id;  // outputs.jsonl names generations by id
  for (const std::string& file : files) {
    auto loaded = ReadPromptFile(prompts.ResolvePath(file), static_cast<int>(per_task));
    if (!loaded.ok()) return prompts.Error("files", std::string(loaded.status().message()));
    for (const Prompt& prompt : *loaded) {
      auto [it, fresh] = file_of_id.emplace(prompt.id, file);
      if (!fresh)
        return prompts.Error("files", absl::StrCat("prompt id '", prompt.id, "' is in both ", it->second, " and ",
                                                   file, " (ids name the outputs: make them unique)"));
    }
    e.prompts.insert(e.prompts.end(), loaded->begin(), loaded->end());
  }
  if (e.prompts.empty()) return prompts.Error("files", "the files hold no prompt");

  ASSIGN_OR_RETURN(Options decoding, root.GetMap("decoding"));
  ASSIGN_OR_RETURN(e.temperatures, decoding.GetDoubleList("temperatures", std::vector<double>{0.0}));
  ASSIGN_OR_RETURN(e.sampling.top_k, decoding.GetInt("top_k", 0));
  ASSIGN_OR_RETURN(e.sampling.top_p, decoding.GetDouble("top_p", 1.0));
  ASSIGN_OR_RETURN(int64_t max_new, decoding.GetInt("max_new_tokens", 64));
  ASSIGN_OR_RETURN(int64_t seed, decoding.GetInt("seed", 0));
  ASSIGN_OR_RETURN(e.stop_at_eos, decoding.GetBool("stop_at_eos", true));
  ASSIGN_OR_RETURN(e.add_bos, decoding.GetBool("add_bos", true));
  // On the CPU the host rules are faster than the device forms' many small
  // tensor ops, and there is no transfer to save: default to them there.
  ASSIGN_OR_RETURN(e.verify_on_device, decoding.GetBool("verify_on_device", e.target->device().is_cuda()));
  // Pipelining hides host work under queued device work; the CPU queues nothing.
  ASSIGN_OR_RETURN(e.pipeline, decoding.GetBool("pipeline", e.target->device().is_cuda()));
  ASSIGN_OR_RETURN(int64_t repeats, decoding.GetInt("repeats", 1));
  RETURN_IF_ERROR(decoding.CheckAllUsed());
  if (repeats < 1 || repeats > 99) return decoding.Error("repeats", "expected an integer in [1, 99]");
  e.repeats = static_cast<int>(repeats);
  // Each key checked on its own, so that the error names the key at fault.
  if (e.temperatures.empty()) return decoding.Error("temperatures", "expected at least one temperature");
  if (e.sampling.top_k < 0) return decoding.Error("top_k", absl::StrCat("expected an integer >= 0 (0: off), got ",
                                                                        e.sampling.top_k));
  if (!(e.sampling.top_p > 0 && e.sampling.top_p <= 1))
    return decoding.Error("top_p", absl::StrCat("expected a number in (0, 1] (1: off), got ", e.sampling.top_p));
  for (double t : e.temperatures) {
    SamplingParams check = e.sampling;
    check.temperature = t;
    if (auto status = check.Validate(); !status.ok()) return decoding.Error("temperatures", std::string(status.message()));
  }
  if (max_new < 1 || max_new > (int64_t{1} << 20))
    return decoding.Error("max_new_tokens", "expected an integer in [1, 1048576]");
  e.max_new_tokens = static_cast<int>(max_new);
  e.seed = static_cast<uint64_t>(seed);

  DrafterEnvironment environment{.target = e.target.get(), .device = *device, .dtype = *dtype,
                                 .kv_capacity = kv_capacity, .seed = e.seed};
  ASSIGN_OR_RETURN(std::vector<Options> methods, root.GetMapList("methods"));
  for (Options& spec : methods) {
    if (first_methods && static_cast<int>(e.methods.size()) >= *first_methods) break;
    ASSIGN_OR_RETURN(Method method, CreateMethod(spec, environment));
    if (method.name == kBaseline) return spec.Error("name", "'baseline' is reserved for autoregressive decoding");
    if (method.name.empty() || method.name.find_first_of(",\n\"") != std::string::npos)
      return spec.Error("name", absl::StrCat("'", method.name, "': expected a non-empty name without a comma, quote or "
                                             "newline (summary.csv's separators)"));
    for (const Method& earlier : e.methods)
      if (earlier.name == method.name)
        return spec.Error("name", absl::StrCat("'", method.name, "' names two methods (their rows would merge)"));
    // A rule that reads only the target's argmax keeps greedy decoding's law,
    // which is the target's only at T = 0: at a higher temperature its run
    // would be labelled lossless and be greedy decoding.
    for (double t : e.temperatures)
      if (t > 0 && !method.verifier->traits().needs_target_rows)
        return spec.Error("verifier", absl::StrCat("'", method.verifier_name, "' reads only the target's argmax, so "
                                                   "it keeps the target's law only at temperature 0, and "
                                                   "decoding.temperatures has ", t, ": run it at [0], or verify with "
                                                   "point_mass (token-only drafts) or a rule of the drafter's q"));
    // Before the target captures its graphs (Run's PrepareForDecoding).
    if (absl::Status kept = e.target->KeepHiddenStates(method.drafter->target_features().hidden_layers); !kept.ok())
      return spec.Error("drafter", absl::StrCat("reads target features the target lacks: ", kept.message()));
    e.methods.push_back(std::move(method));
  }
  if (root.Has("measure_acceptance")) {
    ASSIGN_OR_RETURN(Options measure, root.GetMap("measure_acceptance"));
    e.measure_acceptance = measure;
  }
  RETURN_IF_ERROR(root.CheckAllUsed());
  return e;
}

absl::StatusOr<std::vector<std::vector<int32_t>>> EncodePrompts(const Experiment& experiment) {
  std::vector<std::vector<int32_t>> encoded;
  for (const Prompt& p : experiment.prompts) {
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, experiment.tokenizer->Encode(p.text));
    if (experiment.add_bos && experiment.tokenizer->bos_id() >= 0) ids.insert(ids.begin(), experiment.tokenizer->bos_id());
    // Positions past the model's trained context give garbage, not an error: refuse them here.
    const int64_t limit = experiment.target->config().max_position_embeddings;
    if (static_cast<int64_t>(ids.size()) + experiment.max_new_tokens > limit)
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt '", p.id, "' (task ", p.task, ") has ", ids.size(), " tokens; with decoding.max_new_tokens = ",
          experiment.max_new_tokens, " it would reach position ", ids.size() + experiment.max_new_tokens,
          ", past the target's max_position_embeddings (", limit, "): lower decoding.max_new_tokens"));
    encoded.push_back(std::move(ids));
  }
  return encoded;
}

}  // namespace speclab
