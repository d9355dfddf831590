// ModelConfig: the fields of a HuggingFace config.json that speclab uses.
#ifndef SPECLAB_FRAMEWORK_MODEL_MODEL_CONFIG_H_
#define SPECLAB_FRAMEWORK_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace speclab {

struct RopeScaling {
  std::string type;  // "" (none), "llama3", "linear"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  std::string model_type = "llama";  // llama, qwen2, mistral
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // hidden_size / num_attention_heads unless given
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  int64_t sliding_window = 0;   // 0: full attention
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;
  std::string torch_dtype = "float32";

  // Parses config.json; errors name the file and the offending key.
  static absl::StatusOr<ModelConfig> FromJsonFile(const std::string& path);
  // The same from the file's text; `path` names it in errors.
  static absl::StatusOr<ModelConfig> FromJsonText(const std::string& text, const std::string& path);
  // Writes config.json in HuggingFace format (loadable by transformers).
  absl::Status WriteJsonFile(const std::string& path) const;
  // Consistency checks (head counts divide, sizes positive, ...).
  absl::Status Validate() const;
  int64_t ParameterCount() const;
};

}  // namespace speclab

#endif  // SPECLAB_FRAMEWORK_MODEL_MODEL_CONFIG_H_
