#include "experiments/head_training.h"

#include <c10/util/Exception.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "experiments/model_loading.h"
#include "framework/core/status_macros.h"
#include "framework/error_text.h"
#include "yaml-cpp/yaml.h"

namespace speclab {

bool ConfigHasSection(const std::string& config_path, std::initializer_list<const char*> keys) {
  try {
    const YAML::Node root = YAML::LoadFile(config_path);
    if (!root.IsMap()) return false;
    for (const char* key : keys)
      if (root[key].IsDefined()) return true;
    return false;
  } catch (const std::exception&) {
    return false;
  }
}

absl::StatusOr<CorpusData> ParseCorpusData(Options& root, int64_t min_seq_len) {
  ASSIGN_OR_RETURN(Options data, root.GetMap("data"));
  CorpusData out;
  ASSIGN_OR_RETURN(std::string tokenizer, data.GetString("tokenizer"));
  ASSIGN_OR_RETURN(std::string train, data.GetString("train"));
  ASSIGN_OR_RETURN(std::string valid, data.GetString("valid"));
  out.tokenizer = data.ResolvePath(tokenizer);
  out.train = data.ResolvePath(train);
  out.valid = data.ResolvePath(valid);
  ASSIGN_OR_RETURN(out.seq_len, data.GetInt("seq_len", out.seq_len));
  if (out.seq_len < min_seq_len) return data.Error("seq_len", absl::StrCat("expected an integer >= ", min_seq_len));
  RETURN_IF_ERROR(data.CheckAllUsed());
  return out;
}

absl::Status ParseTrainingBasics(Options& training, TrainingBasics& b) {
  ASSIGN_OR_RETURN(b.device, training.GetString("device", b.device));
  if (auto device = ParseDevice(b.device); !device.ok())
    return training.Error("device", std::string(device.status().message()));
  ASSIGN_OR_RETURN(b.batch_size, training.GetInt("batch_size", b.batch_size));
  ASSIGN_OR_RETURN(b.steps, training.GetInt("steps", b.steps));
  ASSIGN_OR_RETURN(b.lr, training.GetDouble("lr", b.lr));
  ASSIGN_OR_RETURN(int64_t seed, training.GetInt("seed", static_cast<int64_t>(b.seed)));
  ASSIGN_OR_RETURN(b.log_every, training.GetInt("log_every", b.log_every));
  ASSIGN_OR_RETURN(b.eval_windows, training.GetInt("eval_windows", b.eval_windows));
  if (b.batch_size < 1) return training.Error("batch_size", "expected a positive integer");
  if (b.steps < 1) return training.Error("steps", "expected a positive integer");
  if (!(b.lr > 0)) return training.Error("lr", "expected a positive number");
  if (b.log_every < 1) return training.Error("log_every", "expected a positive integer");
  if (b.eval_windows < 1) return training.Error("eval_windows", "expected a positive integer");
  b.seed = static_cast<uint64_t>(seed);
  return absl::OkStatus();
}

absl::Status RunTrainingGuarded(const std::function<absl::Status()>& run) {
  try {
    return run();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("training failed in LibTorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("training failed: ", ErrorText(e)));
  }
}

}  // namespace speclab
