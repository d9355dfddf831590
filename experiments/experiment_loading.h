// Loading an experiment config: the target, tokenizer, prompts, decoding
// settings and methods, shared by `speclab run` (experiment.cc) and
// `speclab measure-acceptance` (measure_acceptance.cc).
#ifndef SPECLAB_EXPERIMENTS_EXPERIMENT_LOADING_H_
#define SPECLAB_EXPERIMENTS_EXPERIMENT_LOADING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/prompt_set.h"
#include "framework/core/options.h"
#include "framework/tokenizers/tokenizer.h"
#include "framework/method.h"
#include "framework/model/llama_model.h"
#include "framework/sampling.h"

namespace speclab {

// The autoregressive baseline's name in results; no method may take it.
inline constexpr char kBaseline[] = "baseline";

struct Experiment {
  std::string name;
  std::unique_ptr<LlamaModel> target;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<Prompt> prompts;
  std::vector<double> temperatures;
  SamplingParams sampling;  // temperature filled per run
  int max_new_tokens = 64;
  uint64_t seed = 0;
  bool stop_at_eos = true;
  bool add_bos = true;
  bool verify_on_device = true;  // decoding.verify_on_device (default: true on CUDA, false on the CPU)
  bool pipeline = true;          // decoding.pipeline (default: true on CUDA, false on the CPU)
  int repeats = 1;               // decoding.repeats: timed runs of each generation (same seed); the median counts
  std::vector<Method> methods;
  // The optional `measure_acceptance:` mapping, read by RunMeasureAcceptance
  // only; accepted here so that one config serves both commands.
  std::optional<Options> measure_acceptance;
};

// Reads every section of `root` and refuses unknown keys. With
// `first_methods`, builds only that many of the methods (the rest unread:
// measure-acceptance needs the first, and later ones may read what it writes).
absl::StatusOr<Experiment> LoadExperiment(Options& root, std::optional<int> first_methods = std::nullopt);

// The prompts as token ids, with BOS prepended when the config asks for it.
absl::StatusOr<std::vector<std::vector<int32_t>>> EncodePrompts(const Experiment& experiment);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_EXPERIMENT_LOADING_H_
