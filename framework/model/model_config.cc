#include "framework/model/model_config.h"

#include <charconv>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/core/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace speclab {
namespace {

constexpr const char* kSupportedModelTypes[] = {"llama", "qwen2", "mistral"};

std::string SupportedModelTypes() { return absl::StrJoin(kSupportedModelTypes, ", "); }

bool IsSupportedModelType(const std::string& type) {
  for (const char* t : kSupportedModelTypes) {
    if (type == t) return true;
  }
  return false;
}

std::string Describe(const YAML::Node& value) {
  switch (value.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return absl::StrCat("'", value.Scalar(), "'");
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "an object";
    default: return "nothing";
  }
}

// Typed reads from one JSON object. JSON null counts as absent, as it does for
// transformers (e.g. "sliding_window": null, "head_dim": null).
class JsonReader {
 public:
  JsonReader(YAML::Node node, std::string file, std::string prefix = "")
      : node_(std::move(node)), file_(std::move(file)), prefix_(std::move(prefix)) {}

  bool Has(const std::string& key) const {
    const YAML::Node& n = node_;
    const YAML::Node v = n[key];
    return v.IsDefined() && !v.IsNull();
  }
  YAML::Node Get(const std::string& key) const {
    const YAML::Node& n = node_;
    return n[key];
  }

  absl::Status Error(const std::string& key, const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": key '", prefix_, key, "': ", message));
  }

  absl::StatusOr<int64_t> Int(const std::string& key, std::optional<int64_t> fallback) const {
    if (!Has(key)) return Missing<int64_t>(key, fallback);
    YAML::Node v = Get(key);
    int64_t out;
    if (v.IsScalar() && absl::SimpleAtoi(v.Scalar(), &out)) return out;
    // Integers written as floats ("4096.0") are accepted when exact.
    double d;
    // (Range first: casting a double outside int64's range is undefined.)
    if (v.IsScalar() && absl::SimpleAtod(v.Scalar(), &d) && d >= -0x1p63 && d < 0x1p63 &&
        d == static_cast<double>(static_cast<int64_t>(d)))
      return static_cast<int64_t>(d);
    return Error(key, absl::StrCat("expected an integer, got ", Describe(v)));
  }

  absl::StatusOr<double> Double(const std::string& key, std::optional<double> fallback) const {
    if (!Has(key)) return Missing<double>(key, fallback);
    YAML::Node v = Get(key);
    double out;
    if (v.IsScalar() && absl::SimpleAtod(v.Scalar(), &out)) return out;
    return Error(key, absl::StrCat("expected a number, got ", Describe(v)));
  }

  absl::StatusOr<bool> Bool(const std::string& key, std::optional<bool> fallback) const {
    if (!Has(key)) return Missing<bool>(key, fallback);
    YAML::Node v = Get(key);
    if (v.IsScalar() && v.Scalar() == "true") return true;
    if (v.IsScalar() && v.Scalar() == "false") return false;
    return Error(key, absl::StrCat("expected true or false, got ", Describe(v)));
  }

  absl::StatusOr<std::string> String(const std::string& key, std::optional<std::string> fallback) const {
    if (!Has(key)) return Missing<std::string>(key, fallback);
    YAML::Node v = Get(key);
    if (v.IsScalar()) return v.Scalar();
    return Error(key, absl::StrCat("expected a string, got ", Describe(v)));
  }

  // An int, or the first element of a list of ints (eos_token_id).
  absl::StatusOr<int64_t> FirstInt(const std::string& key, int64_t fallback) const {
    if (!Has(key)) return fallback;
    YAML::Node v = Get(key);
    if (v.IsSequence()) {
      if (v.size() == 0) return fallback;
      int64_t out;
      if (v[0].IsScalar() && absl::SimpleAtoi(v[0].Scalar(), &out)) return out;
      return Error(key, absl::StrCat("expected a list of integers, got ", Describe(v[0]), " as first element"));
    }
    return Int(key, fallback);
  }

  const std::string& file() const { return file_; }

 private:
  template <typename T>
  absl::StatusOr<T> Missing(const std::string& key, const std::optional<T>& fallback) const {
    if (fallback.has_value()) return *fallback;
    return Error(key, "required but missing");
  }

  YAML::Node node_;
  std::string file_;
  std::string prefix_;
};

// Like ASSIGN_OR_RETURN into an existing field, but a single statement, so it
// can be the body of an `if`.
#define SPECLAB_ASSIGN_(lhs, expr)                     \
  do {                                                 \
    auto speclab_v_ = (expr);                          \
    if (!speclab_v_.ok()) return speclab_v_.status(); \
    lhs = *std::move(speclab_v_);                      \
  } while (false)

// Reads the RoPE settings: the legacy "rope_theta" + "rope_scaling" pair
// (transformers 4.x) or the "rope_parameters" object (transformers 5.x).
absl::Status ParseRope(const JsonReader& json, ModelConfig& config) {
  SPECLAB_ASSIGN_(config.rope_theta, json.Double("rope_theta", 10000.0));
  std::string key = "rope_scaling";
  if (json.Has("rope_parameters")) {
    key = "rope_parameters";
  } else if (!json.Has("rope_scaling")) {
    return absl::OkStatus();
  }
  const YAML::Node top = json.Get(key);
  if (!top.IsMap()) return json.Error(key, absl::StrCat("expected an object, got ", Describe(top)));
  // transformers 5 may nest the parameters per layer type. (A fresh Node, not
  // operator=, which in yaml-cpp rewrites the referenced node in place.)
  const bool nested = !top["rope_type"].IsDefined() && !top["type"].IsDefined() && top["full_attention"].IsMap();
  const YAML::Node node = nested ? top["full_attention"] : top;
  if (nested) key += ".full_attention";
  JsonReader rope(node, json.file(), key + ".");
  std::string type;
  SPECLAB_ASSIGN_(type, rope.String(rope.Has("rope_type") ? "rope_type" : "type", "default"));
  SPECLAB_ASSIGN_(config.rope_theta, rope.Double("rope_theta", config.rope_theta));
  if (type == "default") return absl::OkStatus();
  if (type != "llama3" && type != "linear") {
    return json.Error(key, absl::StrCat("unsupported rope type '", type, "' (supported: default, llama3, linear)"));
  }
  RopeScaling& s = config.rope_scaling;
  s.type = type;
  SPECLAB_ASSIGN_(s.factor, rope.Double("factor", std::nullopt));
  if (type == "llama3") {
    SPECLAB_ASSIGN_(s.low_freq_factor, rope.Double("low_freq_factor", std::nullopt));
    SPECLAB_ASSIGN_(s.high_freq_factor, rope.Double("high_freq_factor", std::nullopt));
    SPECLAB_ASSIGN_(s.original_max_position_embeddings,
                    rope.Int("original_max_position_embeddings", std::nullopt));
  }
  return absl::OkStatus();
}

// Sliding-window attention: Mistral applies it to every layer when set; Qwen2
// only with use_sliding_window, and then per layer, which speclab refuses.
absl::Status ParseSlidingWindow(const JsonReader& json, ModelConfig& config) {
  if (config.model_type == "mistral") {
    SPECLAB_ASSIGN_(config.sliding_window, json.Int("sliding_window", 0));
    return absl::OkStatus();
  }
  if (config.model_type == "qwen2") {
    bool use_sliding = false;
    SPECLAB_ASSIGN_(use_sliding, json.Bool("use_sliding_window", false));
    if (use_sliding) {
      return json.Error("use_sliding_window", "per-layer sliding-window attention (Qwen2) is not supported");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseConfig(const JsonReader& json) {
  ModelConfig c;
  SPECLAB_ASSIGN_(c.model_type, json.String("model_type", std::nullopt));
  if (!IsSupportedModelType(c.model_type)) {
    return json.Error("model_type", absl::StrCat("unsupported model type '", c.model_type,
                                                 "' (supported: ", SupportedModelTypes(), ")"));
  }
  SPECLAB_ASSIGN_(c.vocab_size, json.Int("vocab_size", std::nullopt));
  SPECLAB_ASSIGN_(c.hidden_size, json.Int("hidden_size", std::nullopt));
  SPECLAB_ASSIGN_(c.intermediate_size, json.Int("intermediate_size", std::nullopt));
  SPECLAB_ASSIGN_(c.num_hidden_layers, json.Int("num_hidden_layers", std::nullopt));
  SPECLAB_ASSIGN_(c.num_attention_heads, json.Int("num_attention_heads", std::nullopt));
  if (c.num_attention_heads <= 0) return json.Error("num_attention_heads", "must be positive");
  SPECLAB_ASSIGN_(c.num_key_value_heads, json.Int("num_key_value_heads", c.num_attention_heads));
  SPECLAB_ASSIGN_(c.head_dim, json.Int("head_dim", c.hidden_size / c.num_attention_heads));
  SPECLAB_ASSIGN_(c.max_position_embeddings, json.Int("max_position_embeddings", 2048));
  // transformers' default for all three families.
  SPECLAB_ASSIGN_(c.rms_norm_eps, json.Double("rms_norm_eps", 1e-6));
  RETURN_IF_ERROR(ParseRope(json, c));
  SPECLAB_ASSIGN_(c.tie_word_embeddings, json.Bool("tie_word_embeddings", false));
  // Qwen2 always carries q/k/v biases; its config has no attention_bias key.
  SPECLAB_ASSIGN_(c.attention_bias, json.Bool("attention_bias", c.model_type == "qwen2"));
  if (c.model_type == "qwen2") c.attention_bias = true;
  RETURN_IF_ERROR(ParseSlidingWindow(json, c));
  SPECLAB_ASSIGN_(c.bos_token_id, json.FirstInt("bos_token_id", -1));
  SPECLAB_ASSIGN_(c.eos_token_id, json.FirstInt("eos_token_id", -1));
  // transformers 5 writes "dtype", 4.x "torch_dtype".
  SPECLAB_ASSIGN_(c.torch_dtype, json.String("torch_dtype", "float32"));
  if (json.Has("dtype")) SPECLAB_ASSIGN_(c.torch_dtype, json.String("dtype", std::nullopt));
  if (json.Has("hidden_act")) {
    std::string act;
    SPECLAB_ASSIGN_(act, json.String("hidden_act", std::nullopt));
    if (act != "silu") return json.Error("hidden_act", absl::StrCat("only 'silu' is supported, got '", act, "'"));
  }
  if (json.Has("mlp_bias")) {
    bool mlp_bias = false;
    SPECLAB_ASSIGN_(mlp_bias, json.Bool("mlp_bias", false));
    if (mlp_bias) return json.Error("mlp_bias", "MLP biases are not supported");
  }
  return c;
}

// Shortest text that reads back as the same double, always marked as a float.
std::string JsonDouble(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string JsonObject(const std::vector<std::pair<std::string, std::string>>& fields, const std::string& indent) {
  std::string out = "{\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    absl::StrAppend(&out, indent, "  ", JsonString(fields[i].first), ": ", fields[i].second,
                    i + 1 < fields.size() ? ",\n" : "\n");
  }
  return absl::StrCat(out, indent, "}");
}

std::string Architecture(const std::string& model_type) {
  if (model_type == "qwen2") return "Qwen2ForCausalLM";
  if (model_type == "mistral") return "MistralForCausalLM";
  return "LlamaForCausalLM";
}

#undef SPECLAB_ASSIGN_

}  // namespace

absl::StatusOr<ModelConfig> ModelConfig::FromJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open model config"));
  std::stringstream text;
  text << in.rdbuf();
  return FromJsonText(text.str(), path);
}

absl::StatusOr<ModelConfig> ModelConfig::FromJsonText(const std::string& text, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", e.mark.line + 1, ": invalid JSON: ", e.msg));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": expected a JSON object"));
  absl::StatusOr<ModelConfig> config;
  try {
    config = ParseConfig(JsonReader(root, path));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": malformed config: ", e.what()));
  }
  if (!config.ok()) return config.status();
  absl::Status valid = config->Validate();
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
  return config;
}

absl::Status ModelConfig::WriteJsonFile(const std::string& path) const {
  RETURN_IF_ERROR(Validate());
  auto i = [](int64_t v) { return absl::StrCat(v); };
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  std::string rope_json = "null";
  if (!rope_scaling.type.empty()) {
    std::vector<std::pair<std::string, std::string>> rope = {{"rope_type", JsonString(rope_scaling.type)},
                                                             {"factor", JsonDouble(rope_scaling.factor)}};
    if (rope_scaling.type == "llama3") {
      rope.emplace_back("low_freq_factor", JsonDouble(rope_scaling.low_freq_factor));
      rope.emplace_back("high_freq_factor", JsonDouble(rope_scaling.high_freq_factor));
      rope.emplace_back("original_max_position_embeddings", i(rope_scaling.original_max_position_embeddings));
    }
    rope_json = JsonObject(rope, "  ");
  }
  std::vector<std::pair<std::string, std::string>> fields = {
      {"architectures", absl::StrCat("[", JsonString(Architecture(model_type)), "]")},
      {"model_type", JsonString(model_type)},
      {"vocab_size", i(vocab_size)},
      {"hidden_size", i(hidden_size)},
      {"intermediate_size", i(intermediate_size)},
      {"num_hidden_layers", i(num_hidden_layers)},
      {"num_attention_heads", i(num_attention_heads)},
      {"num_key_value_heads", i(num_key_value_heads)},
      {"head_dim", i(head_dim)},
      {"hidden_act", JsonString("silu")},
      {"max_position_embeddings", i(max_position_embeddings)},
      {"rms_norm_eps", JsonDouble(rms_norm_eps)},
      {"rope_theta", JsonDouble(rope_theta)},
      {"rope_scaling", rope_json},
      {"tie_word_embeddings", b(tie_word_embeddings)},
      {"initializer_range", "0.02"},
      {"use_cache", "true"},
  };
  if (model_type == "llama") {
    fields.emplace_back("attention_bias", b(attention_bias));
    fields.emplace_back("mlp_bias", "false");
  }
  if (model_type == "mistral") {
    fields.emplace_back("sliding_window", sliding_window > 0 ? i(sliding_window) : "null");
  }
  if (model_type == "qwen2") {
    fields.emplace_back("use_sliding_window", "false");
    fields.emplace_back("sliding_window", "null");
  }
  if (bos_token_id >= 0) fields.emplace_back("bos_token_id", i(bos_token_id));
  if (eos_token_id >= 0) fields.emplace_back("eos_token_id", i(eos_token_id));
  fields.emplace_back("torch_dtype", JsonString(torch_dtype));
  std::ofstream out(path, std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write model config"));
  out << JsonObject(fields, "") << "\n";
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::Status ModelConfig::Validate() const {
  auto bad = [](const std::string& key, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("model config: ", key, " ", why));
  };
  if (!IsSupportedModelType(model_type)) {
    return bad("model_type",
               absl::StrCat("'", model_type, "' is unsupported (supported: ", SupportedModelTypes(), ")"));
  }
  const std::pair<const char*, int64_t> positives[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"head_dim", head_dim},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [key, value] : positives) {
    if (value <= 0) return bad(key, absl::StrCat("must be positive, got ", value));
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    return bad("num_attention_heads", absl::StrCat("(", num_attention_heads,
                                                   ") must be a multiple of num_key_value_heads (",
                                                   num_key_value_heads, ")"));
  }
  if (head_dim % 2 != 0) return bad("head_dim", absl::StrCat("must be even for RoPE, got ", head_dim));
  if (!(rms_norm_eps > 0)) return bad("rms_norm_eps", "must be positive");
  if (!(rope_theta > 0)) return bad("rope_theta", "must be positive");
  if (sliding_window < 0) return bad("sliding_window", "must be >= 0");
  if (sliding_window > 0 && model_type != "mistral") return bad("sliding_window", "is only supported for mistral");
  if (model_type == "qwen2" && !attention_bias) return bad("attention_bias", "must be true for qwen2");
  if (model_type == "mistral" && attention_bias) return bad("attention_bias", "must be false for mistral");
  const RopeScaling& s = rope_scaling;
  if (!s.type.empty() && s.type != "llama3" && s.type != "linear") {
    return bad("rope_scaling.rope_type", absl::StrCat("'", s.type, "' is unsupported (supported: llama3, linear)"));
  }
  if (!s.type.empty() && !(s.factor > 0)) return bad("rope_scaling.factor", "must be positive");
  if (s.type == "llama3") {
    if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor)) {
      return bad("rope_scaling", "needs 0 < low_freq_factor < high_freq_factor");
    }
    if (s.original_max_position_embeddings <= 0) {
      return bad("rope_scaling.original_max_position_embeddings", "must be positive");
    }
  }
  return absl::OkStatus();
}

int64_t ModelConfig::ParameterCount() const {
  const int64_t q = num_attention_heads * head_dim;
  const int64_t kv = num_key_value_heads * head_dim;
  // Llama's attention_bias covers o_proj too; Qwen2's biases are q/k/v only.
  const int64_t bias = attention_bias ? q + 2 * kv + (model_type == "llama" ? hidden_size : 0) : 0;
  const int64_t attention = hidden_size * (q + 2 * kv) + q * hidden_size + bias;
  const int64_t mlp = 3 * hidden_size * intermediate_size;
  const int64_t layer = attention + mlp + 2 * hidden_size;
  const int64_t embeddings = vocab_size * hidden_size * (tie_word_embeddings ? 1 : 2);
  return embeddings + num_hidden_layers * layer + hidden_size;
}

}  // namespace speclab
