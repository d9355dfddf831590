// What the head trainers (train_acceptance_head.h, train_draft_head.h) share:
// recognising their configs, their `data:` section, and errors as Status.
#ifndef SPECLAB_EXPERIMENTS_HEAD_TRAINING_H_
#define SPECLAB_EXPERIMENTS_HEAD_TRAINING_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/core/options.h"

namespace speclab {

// True if the YAML file at `config_path` is a mapping with one of `keys`
// (false for a file that does not parse: the model trainer reports it).
bool ConfigHasSection(const std::string& config_path, std::initializer_list<const char*> keys);

// `data:`: tokenizer, train, valid (paths resolved against the config's
// folder) and seq_len (at least `min_seq_len`); unknown keys refused.
struct CorpusData {
  std::string tokenizer, train, valid;
  int64_t seq_len = 128;
};
absl::StatusOr<CorpusData> ParseCorpusData(Options& root, int64_t min_seq_len);

// `training:`'s keys every head trainer reads, each checked: device (auto |
// cpu | cuda), batch_size, steps, lr, seed, log_every, eval_windows; absent
// keys keep the values `basics` holds. The caller reads its own keys next,
// then refuses unknown ones (Options::CheckAllUsed).
struct TrainingBasics {
  std::string device = "auto";
  int64_t batch_size = 8, steps = 300, log_every = 20, eval_windows = 32;
  double lr = 1e-3;
  uint64_t seed = 1;
};
absl::Status ParseTrainingBasics(Options& training, TrainingBasics& basics);

// `run()`, with LibTorch's and other exceptions turned into errors.
absl::Status RunTrainingGuarded(const std::function<absl::Status()>& run);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_HEAD_TRAINING_H_
