#include "experiments/head_training.h"

#include <c10/util/Exception.h>

#include <exception>

#include "absl/strings/str_cat.h"
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
