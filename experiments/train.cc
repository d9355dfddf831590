#include "experiments/train.h"
#include "framework/core/file_util.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/corpus_text.h"
#include "experiments/train_acceptance_head.h"
#include "experiments/train_draft_head.h"
#include "experiments/model_loading.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/error_text.h"
#include "framework/tokenizers/tokenizer.h"
#include "framework/model/llama_model.h"
#include "framework/model/model_config.h"
#include "framework/model/safetensors.h"
#include "yaml-cpp/yaml.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr char kCheckpointDir[] = "checkpoint";
constexpr char kStateFile[] = "state.json";
constexpr char kOptimizerFile[] = "optimizer.safetensors";

// ---------------------------------------------------------------------------
// Settings.

struct Settings {
  std::string config_file;
  std::string resolved_yaml;

  ModelConfig model;  // vocab_size 0: the tokenizer's

  std::string tokenizer_path;
  std::string train_path;
  std::string valid_path;
  std::string test_path;  // empty: none
  int64_t seq_len = 256;

  std::string device = "auto";
  std::string dtype = "auto";
  int64_t batch_size = 64;
  int64_t steps = 2000;
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 100;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;
  int64_t eval_every = 200;
  int64_t eval_batches = 20;
  int64_t checkpoint_every = 500;
  int64_t log_every = 10;
  int64_t seed = 0;
  bool flat_parameters = true;
  int64_t run_steps = 0;      // 0: until `steps`
  double time_limit_s = 0.0;  // 0: none

  std::string teacher;  // empty: no distillation
  double alpha = 1.0;

  std::string output;
  std::string save_dtype = "bfloat16";
  bool resume = true;
};

absl::Status Check(bool ok, const Options& options, const std::string& key, const std::string& message) {
  return ok ? absl::OkStatus() : options.Error(key, message);
}

absl::Status ParseModel(Options& m, int64_t seq_len, ModelConfig* c) {
  ASSIGN_OR_RETURN(c->hidden_size, m.GetInt("hidden_size"));
  ASSIGN_OR_RETURN(c->intermediate_size, m.GetInt("intermediate_size"));
  ASSIGN_OR_RETURN(c->num_hidden_layers, m.GetInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(c->num_attention_heads, m.GetInt("num_attention_heads"));
  ASSIGN_OR_RETURN(c->num_key_value_heads, m.GetInt("num_key_value_heads", c->num_attention_heads));
  ASSIGN_OR_RETURN(c->head_dim, m.GetInt("head_dim", 0));
  ASSIGN_OR_RETURN(c->vocab_size, m.GetInt("vocab_size", 0));
  ASSIGN_OR_RETURN(c->max_position_embeddings,
                   m.GetInt("max_position_embeddings", std::max<int64_t>(2048, seq_len)));
  ASSIGN_OR_RETURN(c->rope_theta, m.GetDouble("rope_theta", 10000.0));
  ASSIGN_OR_RETURN(c->tie_word_embeddings, m.GetBool("tie_word_embeddings", false));
  ASSIGN_OR_RETURN(c->rms_norm_eps, m.GetDouble("rms_norm_eps", 1e-5));
  const std::pair<const char*, int64_t> sizes[] = {{"hidden_size", c->hidden_size},
                                                   {"intermediate_size", c->intermediate_size},
                                                   {"num_hidden_layers", c->num_hidden_layers},
                                                   {"num_attention_heads", c->num_attention_heads},
                                                   {"num_key_value_heads", c->num_key_value_heads}};
  for (const auto& [key, value] : sizes) RETURN_IF_ERROR(Check(value > 0, m, key, "must be positive"));
  RETURN_IF_ERROR(Check(c->num_attention_heads % c->num_key_value_heads == 0, m, "num_key_value_heads",
                        "must divide num_attention_heads"));
  RETURN_IF_ERROR(Check(c->head_dim > 0 || c->hidden_size % c->num_attention_heads == 0, m,
                        "num_attention_heads", "must divide hidden_size (or give head_dim)"));
  RETURN_IF_ERROR(Check(c->head_dim >= 0, m, "head_dim", "must not be negative"));
  RETURN_IF_ERROR(Check(c->vocab_size >= 0, m, "vocab_size", "must not be negative"));
  RETURN_IF_ERROR(Check(c->max_position_embeddings >= seq_len, m, "max_position_embeddings",
                        absl::StrCat("must be at least data.seq_len (", seq_len, ")")));
  RETURN_IF_ERROR(Check(c->rope_theta > 0, m, "rope_theta", "must be positive"));
  RETURN_IF_ERROR(Check(c->rms_norm_eps > 0, m, "rms_norm_eps", "must be positive"));
  if (c->head_dim == 0) c->head_dim = c->hidden_size / c->num_attention_heads;
  c->model_type = "llama";
  return m.CheckAllUsed();
}

absl::Status ParseTraining(Options& t, Settings* s) {
  ASSIGN_OR_RETURN(s->device, t.GetString("device", "auto"));
  ASSIGN_OR_RETURN(s->dtype, t.GetString("dtype", "auto"));
  RETURN_IF_ERROR(Check(s->dtype == "auto" || s->dtype == "float32" || s->dtype == "bfloat16", t, "dtype",
                        absl::StrCat("expected auto, float32 or bfloat16, got '", s->dtype, "'")));
  ASSIGN_OR_RETURN(s->batch_size, t.GetInt("batch_size", 64));
  RETURN_IF_ERROR(Check(s->batch_size > 0, t, "batch_size", "must be positive"));
  ASSIGN_OR_RETURN(s->steps, t.GetInt("steps", 2000));
  RETURN_IF_ERROR(Check(s->steps >= 0, t, "steps", "must not be negative"));
  ASSIGN_OR_RETURN(s->lr, t.GetDouble("lr", 1e-3));
  RETURN_IF_ERROR(Check(s->lr > 0, t, "lr", "must be positive"));
  ASSIGN_OR_RETURN(s->min_lr, t.GetDouble("min_lr", s->lr * 0.1));
  RETURN_IF_ERROR(Check(s->min_lr >= 0 && s->min_lr <= s->lr, t, "min_lr", "must lie in [0, lr]"));
  ASSIGN_OR_RETURN(s->warmup_steps, t.GetInt("warmup_steps", 100));
  RETURN_IF_ERROR(Check(s->warmup_steps >= 0, t, "warmup_steps", "must not be negative"));
  ASSIGN_OR_RETURN(s->weight_decay, t.GetDouble("weight_decay", 0.1));
  RETURN_IF_ERROR(Check(s->weight_decay >= 0, t, "weight_decay", "must not be negative"));
  ASSIGN_OR_RETURN(s->beta1, t.GetDouble("beta1", 0.9));
  RETURN_IF_ERROR(Check(s->beta1 >= 0 && s->beta1 < 1, t, "beta1", "must lie in [0, 1)"));
  ASSIGN_OR_RETURN(s->beta2, t.GetDouble("beta2", 0.95));
  RETURN_IF_ERROR(Check(s->beta2 >= 0 && s->beta2 < 1, t, "beta2", "must lie in [0, 1)"));
  ASSIGN_OR_RETURN(s->eps, t.GetDouble("eps", 1e-8));
  RETURN_IF_ERROR(Check(s->eps > 0, t, "eps", "must be positive"));
  ASSIGN_OR_RETURN(s->grad_clip, t.GetDouble("grad_clip", 1.0));
  RETURN_IF_ERROR(Check(s->grad_clip >= 0, t, "grad_clip", "must not be negative (0: no clipping)"));
  ASSIGN_OR_RETURN(s->eval_every, t.GetInt("eval_every", 200));
  RETURN_IF_ERROR(Check(s->eval_every >= 0, t, "eval_every", "must not be negative (0: only at the end)"));
  ASSIGN_OR_RETURN(s->eval_batches, t.GetInt("eval_batches", 20));
  RETURN_IF_ERROR(Check(s->eval_batches > 0, t, "eval_batches", "must be positive"));
  ASSIGN_OR_RETURN(s->checkpoint_every, t.GetInt("checkpoint_every", 500));
  RETURN_IF_ERROR(Check(s->checkpoint_every >= 0, t, "checkpoint_every", "must not be negative (0: only at the end)"));
  ASSIGN_OR_RETURN(s->log_every, t.GetInt("log_every", 10));
  RETURN_IF_ERROR(Check(s->log_every > 0, t, "log_every", "must be positive"));
  ASSIGN_OR_RETURN(s->seed, t.GetInt("seed", 0));
  ASSIGN_OR_RETURN(s->flat_parameters, t.GetBool("flat_parameters", true));
  ASSIGN_OR_RETURN(s->run_steps, t.GetInt("run_steps", 0));
  RETURN_IF_ERROR(Check(s->run_steps >= 0, t, "run_steps", "must not be negative (0: until training.steps)"));
  ASSIGN_OR_RETURN(s->time_limit_s, t.GetDouble("time_limit_s", 0.0));
  RETURN_IF_ERROR(Check(s->time_limit_s >= 0, t, "time_limit_s", "must not be negative (0: none)"));
  if (t.Has("distill")) {
    ASSIGN_OR_RETURN(Options d, t.GetMap("distill"));
    ASSIGN_OR_RETURN(std::string teacher, d.GetString("teacher"));
    RETURN_IF_ERROR(Check(!teacher.empty(), d, "teacher", "must name a model folder"));
    s->teacher = d.ResolvePath(teacher);
    ASSIGN_OR_RETURN(s->alpha, d.GetDouble("alpha", 1.0));
    RETURN_IF_ERROR(Check(s->alpha >= 0 && s->alpha <= 1, d, "alpha", "must lie in [0, 1]"));
    RETURN_IF_ERROR(d.CheckAllUsed());
  }
  return t.CheckAllUsed();
}

absl::StatusOr<Settings> ParseSettings(const std::string& path, const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(Options root, Options::FromFileWithOverrides(path, overrides));
  Settings s;
  s.config_file = path;
  s.resolved_yaml = root.Dump();

  ASSIGN_OR_RETURN(Options data, root.GetMap("data"));
  ASSIGN_OR_RETURN(std::string tokenizer, data.GetString("tokenizer"));
  s.tokenizer_path = data.ResolvePath(tokenizer);
  ASSIGN_OR_RETURN(std::string train, data.GetString("train"));
  s.train_path = data.ResolvePath(train);
  ASSIGN_OR_RETURN(std::string valid, data.GetString("valid"));
  s.valid_path = data.ResolvePath(valid);
  ASSIGN_OR_RETURN(std::string test, data.GetString("test", ""));
  if (!test.empty()) s.test_path = data.ResolvePath(test);
  ASSIGN_OR_RETURN(s.seq_len, data.GetInt("seq_len", 256));
  RETURN_IF_ERROR(Check(s.seq_len > 0, data, "seq_len", "must be positive"));
  RETURN_IF_ERROR(data.CheckAllUsed());

  ASSIGN_OR_RETURN(Options model, root.GetMap("model"));
  RETURN_IF_ERROR(ParseModel(model, s.seq_len, &s.model));

  ASSIGN_OR_RETURN(Options training, root.GetMap("training"));
  RETURN_IF_ERROR(ParseTraining(training, &s));

  ASSIGN_OR_RETURN(std::string output, root.GetString("output"));
  RETURN_IF_ERROR(Check(!output.empty(), root, "output", "must name a folder"));
  // Relative to the working directory (the repo root), like the data paths
  // that exist there; ResolvePath would move a not-yet-existing folder next to
  // the config file.
  s.output = output;
  ASSIGN_OR_RETURN(s.save_dtype, root.GetString("save_dtype", "bfloat16"));
  RETURN_IF_ERROR(Check(s.save_dtype == "bfloat16" || s.save_dtype == "float32", root, "save_dtype",
                        absl::StrCat("expected bfloat16 or float32, got '", s.save_dtype, "'")));
  ASSIGN_OR_RETURN(s.resume, root.GetBool("resume", true));
  RETURN_IF_ERROR(root.CheckAllUsed());
  return s;
}

// ---------------------------------------------------------------------------
// Token streams, cached as OUTPUT/cache/SPLIT.bin.

struct CacheHeader {
  char magic[8];
  uint32_t bytes_per_id;
  uint32_t reserved;
  uint64_t count;
  uint64_t vocab_size;
  uint64_t text_bytes;
};
constexpr char kCacheMagic[8] = {'S', 'L', 'T', 'O', 'K', 'E', 'N', '1'};

// The cached ids (int32 CPU tensor), or an undefined tensor when the cache is
// missing, stale or does not match.
at::Tensor ReadTokenCache(const std::string& cache, const std::string& text, const std::string& tokenizer,
                          int64_t vocab_size) {
  std::error_code ec;
  if (!fs::exists(cache, ec)) return at::Tensor();
  const auto cache_time = fs::last_write_time(cache, ec);
  if (ec || cache_time < fs::last_write_time(text, ec) || ec || cache_time < fs::last_write_time(tokenizer, ec) || ec)
    return at::Tensor();
  std::ifstream in(cache, std::ios::binary);
  CacheHeader header;
  if (!in.read(reinterpret_cast<char*>(&header), sizeof(header))) return at::Tensor();
  if (std::memcmp(header.magic, kCacheMagic, sizeof(kCacheMagic)) != 0 ||
      header.vocab_size != static_cast<uint64_t>(vocab_size) || header.text_bytes != fs::file_size(text, ec) ||
      (header.bytes_per_id != 2 && header.bytes_per_id != 4))
    return at::Tensor();
  at::Tensor ids = at::empty({static_cast<int64_t>(header.count)}, header.bytes_per_id == 2 ? at::kShort : at::kInt);
  if (!in.read(static_cast<char*>(ids.data_ptr()), static_cast<std::streamsize>(header.count * header.bytes_per_id)))
    return at::Tensor();
  return ids.to(at::kInt);
}

absl::Status WriteTokenCache(const std::string& cache, const std::vector<int32_t>& ids, int64_t vocab_size,
                             uint64_t text_bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(cache).parent_path(), ec);
  const std::string tmp = cache + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError(absl::StrCat(tmp, ": cannot write the token cache"));
    CacheHeader header{};
    std::memcpy(header.magic, kCacheMagic, sizeof(kCacheMagic));
    header.bytes_per_id = vocab_size <= 32768 ? 2 : 4;
    header.count = ids.size();
    header.vocab_size = static_cast<uint64_t>(vocab_size);
    header.text_bytes = text_bytes;
    out.write(reinterpret_cast<const char*>(&header), sizeof(header));
    if (header.bytes_per_id == 2) {
      std::vector<int16_t> narrow(ids.begin(), ids.end());
      out.write(reinterpret_cast<const char*>(narrow.data()), static_cast<std::streamsize>(narrow.size() * 2));
    } else {
      out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 4));
    }
    if (!out) return absl::InternalError(absl::StrCat(tmp, ": cannot write the token cache"));
  }
  fs::rename(tmp, cache, ec);
  if (ec) return absl::InternalError(absl::StrCat(cache, ": cannot rename the token cache: ", ec.message()));
  return absl::OkStatus();
}

// Ids of `text` (int32 CPU tensor): TokenizeCorpusText (corpus_text.h),
// cached beside the output.
absl::StatusOr<at::Tensor> LoadTokens(Tokenizer& tokenizer, const std::string& tokenizer_path,
                                      const std::string& text, const std::string& cache) {
  std::error_code ec;
  const uint64_t text_bytes = fs::file_size(text, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(text, ": cannot read the text file: ", ec.message()));
  const int64_t vocab = tokenizer.vocab_size();
  at::Tensor cached = ReadTokenCache(cache, text, tokenizer_path, vocab);
  if (cached.defined()) {
    std::printf("tokens: %s: %lld ids (cached in %s)\n", text.c_str(), static_cast<long long>(cached.numel()),
                cache.c_str());
    return cached;
  }
  const auto start = Clock::now();
  ASSIGN_OR_RETURN(CorpusIds corpus, TokenizeCorpusText(tokenizer, text));
  const std::vector<int32_t>& ids = corpus.ids;
  const int64_t documents = corpus.documents;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("tokens: %s: %lld documents, %zu ids (%.1f s)\n", text.c_str(), static_cast<long long>(documents),
              ids.size(), seconds);
  RETURN_IF_ERROR(WriteTokenCache(cache, ids, vocab, text_bytes));
  at::Tensor out = at::empty({static_cast<int64_t>(ids.size())}, at::kInt);
  if (!ids.empty()) std::memcpy(out.data_ptr(), ids.data(), ids.size() * sizeof(int32_t));
  return out;
}

// ---------------------------------------------------------------------------
// AdamW over flat buffers.
//
// The master weights, both moments and (when the model allows it) the
// parameters and gradients of the working model live in single flat buffers,
// so that one step is a dozen kernels whatever the number of tensors. The
// model's parameters are re-pointed (Tensor::set_) at slices of the buffers;
// if a model refuses that, the optimizer falls back to per-tensor copies.
class FlatAdamW {
 public:
  struct Hyper {
    double beta1, beta2, eps, weight_decay, grad_clip;
    bool flat_parameters;  // re-point the models' tensors at the flat buffers
  };

  static absl::StatusOr<std::unique_ptr<FlatAdamW>> Create(LlamaModel* master, LlamaModel* working,
                                                           const Hyper& hyper) {
    std::unique_ptr<FlatAdamW> opt(new FlatAdamW(hyper));
    RETURN_IF_ERROR(opt->Init(master, working));
    return opt;
  }

  int64_t numel() const { return numel_; }
  bool aliased() const { return working_aliased_; }
  const at::Tensor& grad_norm() const { return grad_norm_; }

  void ZeroGrad() {
    if (working_aliased_) {
      grad_flat_.zero_();
      return;
    }
    for (auto& p : params_)
      for (auto& t : p.working) t.mutable_grad() = at::Tensor();
  }

  // One update with learning rate `lr`; `t` is the 1-based step count.
  void Step(double lr, int64_t t) {
    c10::NoGradGuard no_grad;
    at::Tensor g = working_aliased_ ? grad_flat_ : GatherGrads();
    if (g.scalar_type() != at::kFloat) g = g.to(at::kFloat);
    grad_norm_ = g.norm();
    if (hyper_.grad_clip > 0) g.mul_((grad_norm_ + 1e-6).reciprocal().mul_(hyper_.grad_clip).clamp_max_(1.0));
    exp_avg_.lerp_(g, 1.0 - hyper_.beta1);
    exp_avg_sq_.mul_(hyper_.beta2).addcmul_(g, g, 1.0 - hyper_.beta2);
    if (hyper_.weight_decay > 0 && decay_numel_ > 0)
      master_flat_.narrow(0, 0, decay_numel_).mul_(1.0 - lr * hyper_.weight_decay);
    const double bias1 = 1.0 - std::pow(hyper_.beta1, static_cast<double>(t));
    const double bias2 = 1.0 - std::pow(hyper_.beta2, static_cast<double>(t));
    at::Tensor denom = exp_avg_sq_.sqrt().div_(std::sqrt(bias2)).add_(hyper_.eps);
    master_flat_.addcdiv_(exp_avg_, denom, -lr / bias1);
    RefreshWorking();
  }

  // Makes the master model's parameters hold the current master weights.
  void SyncMaster() {
    if (master_aliased_) return;
    c10::NoGradGuard no_grad;
    for (auto& p : params_)
      for (auto& t : p.master) t.copy_(MasterView(p));
  }

  std::map<std::string, at::Tensor> StateTensors() const {
    std::map<std::string, at::Tensor> out;
    for (const auto& p : params_) {
      out["exp_avg." + p.name] = exp_avg_.narrow(0, p.offset, p.numel).view(p.shape);
      out["exp_avg_sq." + p.name] = exp_avg_sq_.narrow(0, p.offset, p.numel).view(p.shape);
    }
    return out;
  }

  absl::Status LoadState(const std::map<std::string, at::Tensor>& tensors, const std::string& file) {
    c10::NoGradGuard no_grad;
    for (const auto& p : params_) {
      for (const char* prefix : {"exp_avg.", "exp_avg_sq."}) {
        const std::string key = prefix + p.name;
        auto it = tensors.find(key);
        if (it == tensors.end())
          return absl::DataLossError(absl::StrCat(file, ": tensor '", key, "' is missing"));
        if (it->second.sizes() != at::IntArrayRef(p.shape))
          return absl::DataLossError(absl::StrCat(file, ": tensor '", key, "' has shape ",
                                                  ShapeString(it->second.sizes()), ", expected ",
                                                  ShapeString(p.shape)));
        const at::Tensor& flat = std::string(prefix) == "exp_avg." ? exp_avg_ : exp_avg_sq_;
        flat.narrow(0, p.offset, p.numel).copy_(it->second.reshape(-1));
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Param {
    std::string name;                 // HF name of the first tensor of the group
    std::vector<std::string> names;   // every name sharing this storage (tied weights)
    std::vector<at::Tensor> master;   // distinct tensors of the master model
    std::vector<at::Tensor> working;  // distinct tensors of the working model
    std::vector<int64_t> shape;
    int64_t numel = 0;
    int64_t offset = 0;
    bool decay = false;
  };

  explicit FlatAdamW(const Hyper& hyper) : hyper_(hyper) {}

  static std::string ShapeString(at::IntArrayRef shape) {
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&out, i ? ", " : "", shape[i]);
    return out + "]";
  }

  // Weight decay on matrices, except the token embeddings (also when tied to lm_head).
  static bool Decays(const std::vector<std::string>& names, const at::Tensor& t) {
    if (t.dim() < 2) return false;
    for (const auto& n : names)
      if (n.find("embed_tokens") != std::string::npos) return false;
    return true;
  }

  at::Tensor MasterView(const Param& p) const { return master_flat_.narrow(0, p.offset, p.numel).view(p.shape); }

  // Appends `t` to `list` unless the same tensor is there already.
  static void AddDistinct(std::vector<at::Tensor>* list, const at::Tensor& t) {
    for (const auto& u : *list)
      if (u.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return;
    list->push_back(t);
  }

  absl::Status Init(LlamaModel* master, LlamaModel* working) {
    shared_ = master == working;
    // Group the master's tensors by storage, so tied weights are one parameter.
    std::unordered_map<const void*, size_t> by_data;
    for (auto& [name, t] : master->NamedParameters()) {
      if (!t.defined()) continue;
      if (t.scalar_type() != at::kFloat)
        return absl::InternalError(absl::StrCat("master parameter '", name, "' is not float32"));
      auto it = by_data.find(t.data_ptr());
      if (it != by_data.end()) {
        Param& p = params_[it->second];
        if (t.sizes() != at::IntArrayRef(p.shape))
          return absl::InternalError(absl::StrCat("parameters '", p.name, "' and '", name,
                                                  "' share memory with different shapes"));
        p.names.push_back(name);
        AddDistinct(&p.master, t);
        continue;
      }
      Param p;
      p.name = name;
      p.names = {name};
      p.master = {t};
      p.shape = t.sizes().vec();
      p.numel = t.numel();
      by_data[t.data_ptr()] = params_.size();
      params_.push_back(std::move(p));
    }
    if (params_.empty()) return absl::InternalError("the model has no parameters");
    std::unordered_map<std::string, at::Tensor> working_by_name;
    for (auto& [name, t] : working->NamedParameters()) working_by_name[name] = t;
    for (auto& p : params_) {
      p.decay = Decays(p.names, p.master.front());
      for (const auto& name : p.names) {
        auto it = working_by_name.find(name);
        if (it == working_by_name.end() || it->second.sizes() != at::IntArrayRef(p.shape))
          return absl::InternalError(absl::StrCat("the working model lacks parameter '", name, "' of shape ",
                                                  ShapeString(p.shape)));
        AddDistinct(&p.working, it->second);
      }
    }
    // Decayed parameters first: weight decay is one kernel on a prefix.
    std::stable_partition(params_.begin(), params_.end(), [](const Param& p) { return p.decay; });
    for (auto& p : params_) {
      p.offset = numel_;
      numel_ += p.numel;
      if (p.decay) decay_numel_ = numel_;
    }

    c10::NoGradGuard no_grad;
    const c10::Device device = params_.front().master.front().device();
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    master_flat_ = at::empty({numel_}, f32);
    for (auto& p : params_) master_flat_.narrow(0, p.offset, p.numel).copy_(p.master.front().reshape(-1));
    exp_avg_ = at::zeros({numel_}, f32);
    exp_avg_sq_ = at::zeros({numel_}, f32);

    master_aliased_ = hyper_.flat_parameters && Alias(&Param::master, master_flat_);
    if (shared_) {
      working_flat_ = master_flat_;
      working_aliased_ = master_aliased_;
    } else {
      const at::ScalarType dtype = params_.front().working.front().scalar_type();
      working_flat_ = master_flat_.to(dtype);
      working_aliased_ = hyper_.flat_parameters && Alias(&Param::working, working_flat_);
      for (auto& p : params_)
        for (auto& t : p.master) t.requires_grad_(false);
    }
    if (!working_aliased_) RefreshWorking();
    for (auto& p : params_)
      for (auto& t : p.working) t.requires_grad_(true);
    if (working_aliased_) {
      grad_flat_ = at::zeros({numel_}, working_flat_.options());
      for (auto& p : params_)
        p.working.front().mutable_grad() = grad_flat_.narrow(0, p.offset, p.numel).view(p.shape);
    }
    return absl::OkStatus();
  }

  // Re-points the tensors `member` of every parameter at slices of `flat`
  // (already holding their values). False when a model's tensors cannot be
  // re-pointed: tied weights held as distinct tensors, or set_ refused.
  bool Alias(std::vector<at::Tensor> Param::*member, const at::Tensor& flat) {
    for (auto& p : params_)
      if ((p.*member).size() != 1) return false;
    const size_t element = flat.element_size();
    try {
      for (auto& p : params_) {
        at::Tensor& t = (p.*member).front();
        if (t.scalar_type() != flat.scalar_type() || t.device() != flat.device()) return false;
        t.set_(flat, flat.storage_offset() + p.offset, p.shape);
        if (t.data_ptr() != static_cast<char*>(flat.data_ptr()) + p.offset * element) return false;
      }
    } catch (const c10::Error&) {
      return false;
    }
    return true;
  }

  // Copies the master weights into the working model.
  void RefreshWorking() {
    if (working_aliased_) {
      if (!shared_) working_flat_.copy_(master_flat_);
      return;
    }
    c10::NoGradGuard no_grad;
    for (auto& p : params_)
      for (auto& t : p.working) t.copy_(MasterView(p));
  }

  // Flat gradient of the working model (non-aliased case).
  at::Tensor GatherGrads() const {
    std::vector<at::Tensor> pieces;
    pieces.reserve(params_.size());
    for (const auto& p : params_) {
      at::Tensor sum;
      for (const auto& t : p.working) {
        const at::Tensor& g = t.grad();
        if (!g.defined()) continue;
        sum = sum.defined() ? sum + g : g;
      }
      if (!sum.defined()) sum = at::zeros(p.shape, master_flat_.options());
      pieces.push_back(sum.to(at::kFloat).reshape(-1));
    }
    return at::cat(pieces);
  }

  Hyper hyper_;
  std::vector<Param> params_;
  int64_t numel_ = 0;
  int64_t decay_numel_ = 0;
  bool shared_ = false;
  bool master_aliased_ = false;
  bool working_aliased_ = false;
  at::Tensor master_flat_;
  at::Tensor working_flat_;
  at::Tensor grad_flat_;
  at::Tensor exp_avg_;
  at::Tensor exp_avg_sq_;
  at::Tensor grad_norm_;
};

// ---------------------------------------------------------------------------
// Logs, checkpoints and small file helpers.

struct LogRow {
  int64_t step = 0;
  double loss = NAN;   // mean training loss since the previous row
  double ce = NAN;     // its cross-entropy part
  double lr = NAN;
  double tokens_per_sec = NAN;
  double valid_ppl = NAN;  // NaN: not evaluated at this step
};

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

std::string CsvNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : ""; }

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string RowsJson(const std::vector<LogRow>& rows) {
  std::string out = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const LogRow& r = rows[i];
    absl::StrAppend(&out, i ? ",\n    " : "\n    ", "{\"step\": ", r.step, ", \"train_loss\": ", JsonNumber(r.loss),
                    ", \"train_ce\": ", JsonNumber(r.ce), ", \"lr\": ", JsonNumber(r.lr),
                    ", \"tokens_per_sec\": ", JsonNumber(r.tokens_per_sec),
                    ", \"valid_ppl\": ", JsonNumber(r.valid_ppl), "}");
  }
  return out + (rows.empty() ? "]" : "\n  ]");
}

double YamlDouble(const YAML::Node& n) {
  if (!n || n.IsNull()) return NAN;
  return n.as<double>();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path, ": cannot write: ", ec.message()));
  return absl::OkStatus();
}


std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s / 60) % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string FormatCount(double v) {
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fk", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Compares the architecture of a checkpoint with the one the config asks for.
absl::Status SameArchitecture(const ModelConfig& a, const ModelConfig& b, const std::string& checkpoint) {
  auto head_dim = [](const ModelConfig& c) {
    return c.head_dim > 0 ? c.head_dim : c.hidden_size / std::max<int64_t>(1, c.num_attention_heads);
  };
  const std::pair<const char*, std::pair<double, double>> fields[] = {
      {"hidden_size", {double(a.hidden_size), double(b.hidden_size)}},
      {"intermediate_size", {double(a.intermediate_size), double(b.intermediate_size)}},
      {"num_hidden_layers", {double(a.num_hidden_layers), double(b.num_hidden_layers)}},
      {"num_attention_heads", {double(a.num_attention_heads), double(b.num_attention_heads)}},
      {"num_key_value_heads", {double(a.num_key_value_heads), double(b.num_key_value_heads)}},
      {"head_dim", {double(head_dim(a)), double(head_dim(b))}},
      {"vocab_size", {double(a.vocab_size), double(b.vocab_size)}},
      {"tie_word_embeddings", {double(a.tie_word_embeddings), double(b.tie_word_embeddings)}},
      {"rope_theta", {a.rope_theta, b.rope_theta}},
  };
  for (const auto& [name, values] : fields) {
    if (values.first != values.second)
      return absl::FailedPreconditionError(absl::StrCat(
          checkpoint, ": the checkpoint has ", name, " = ", values.first, " but the config asks for ",
          values.second, "; set resume: false (or remove the checkpoint) to start over"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The training run.

class Trainer {
 public:
  explicit Trainer(Settings settings) : s_(std::move(settings)) {}

  absl::Status Run() {
    RETURN_IF_ERROR(Setup());
    RETURN_IF_ERROR(Train());
    if (done_ < s_.steps) return absl::OkStatus();  // stopped early, checkpoint written
    return Finish();
  }

 private:
  std::string OutputPath(const std::string& name) const { return (fs::path(s_.output) / name).string(); }

  absl::Status Setup() {
    std::error_code ec;
    fs::create_directories(s_.output, ec);
    if (ec) return absl::InternalError(absl::StrCat(s_.output, ": cannot create the output folder: ", ec.message()));
    RETURN_IF_ERROR(WriteText(OutputPath("train_config.yaml"), s_.resolved_yaml + "\n"));

    auto device = ParseDevice(s_.device);
    if (!device.ok())
      return absl::Status(device.status().code(),
                          absl::StrCat(s_.config_file, ": training.device: ", device.status().message()));
    device_ = *device;
    dtype_ = s_.dtype == "auto" ? (device_.is_cuda() ? at::kBFloat16 : at::kFloat)
                                : (s_.dtype == "bfloat16" ? at::kBFloat16 : at::kFloat);
    tty_ = isatty(fileno(stdout)) != 0;

    ASSIGN_OR_RETURN(tokenizer_, LoadTokenizer(s_.tokenizer_path));
    const int64_t vocab = tokenizer_->vocab_size();
    ModelConfig config = s_.model;
    if (config.vocab_size == 0) config.vocab_size = vocab;
    if (config.vocab_size < vocab)
      return absl::InvalidArgumentError(absl::StrCat(s_.config_file, ": model.vocab_size (", config.vocab_size,
                                                     ") is smaller than the tokenizer's vocabulary (", vocab, ")"));
    config.bos_token_id = tokenizer_->bos_id();
    config.eos_token_id = tokenizer_->eos_id();
    config.torch_dtype = "float32";
    if (absl::Status st = config.Validate(); !st.ok())
      return absl::Status(st.code(), absl::StrCat(s_.config_file, ": model: ", st.message()));

    // Data.
    const std::string cache = OutputPath("cache");
    ASSIGN_OR_RETURN(at::Tensor train, LoadTokens(*tokenizer_, s_.tokenizer_path, s_.train_path,
                                                  (fs::path(cache) / "train.bin").string()));
    ASSIGN_OR_RETURN(at::Tensor valid, LoadTokens(*tokenizer_, s_.tokenizer_path, s_.valid_path,
                                                  (fs::path(cache) / "valid.bin").string()));
    for (const auto& [tokens, path] : {std::pair(train, s_.train_path), std::pair(valid, s_.valid_path)}) {
      if (tokens.numel() < s_.seq_len + 1)
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", tokens.numel(), " tokens, fewer than seq_len + 1 (",
                                                       s_.seq_len + 1, ")"));
    }
    train_ = train.to(device_);
    valid_ = valid.to(device_);
    if (!s_.test_path.empty()) {
      ASSIGN_OR_RETURN(at::Tensor test, LoadTokens(*tokenizer_, s_.tokenizer_path, s_.test_path,
                                                   (fs::path(cache) / "test.bin").string()));
      if (test.numel() < s_.seq_len + 1)
        return absl::InvalidArgumentError(absl::StrCat(s_.test_path, ": ", test.numel(),
                                                       " tokens, fewer than seq_len + 1 (", s_.seq_len + 1, ")"));
      test_ = test.to(device_);
    }
    window_ = at::arange(s_.seq_len + 1, at::TensorOptions().dtype(at::kLong).device(device_));
    // Fixed validation windows: eval_batches * batch_size windows spread evenly.
    {
      const int64_t span = valid_.numel() - s_.seq_len - 1;
      const int64_t count = std::min<int64_t>(s_.eval_batches * s_.batch_size, span / s_.seq_len + 1);
      std::vector<int64_t> offsets(count);
      for (int64_t i = 0; i < count; ++i) offsets[i] = count > 1 ? i * span / (count - 1) : 0;
      valid_offsets_ = at::tensor(offsets, at::kLong).to(device_);
    }

    // Models.
    const int64_t kv = s_.seq_len;
    const fs::path ckpt = fs::path(s_.output) / kCheckpointDir;
    fs::path resume_from;
    if (s_.resume) {
      for (const fs::path& dir : {ckpt, fs::path(s_.output) / (std::string(kCheckpointDir) + ".old")})
        if (fs::exists(dir / kStateFile, ec)) {
          resume_from = dir;
          break;
        }
    }
    if (!resume_from.empty()) {
      ASSIGN_OR_RETURN(master_, LlamaModel::Load(resume_from.string(), device_, at::kFloat, kv));
      RETURN_IF_ERROR(SameArchitecture(master_->config(), config, resume_from.string()));
    } else {
      ASSIGN_OR_RETURN(master_, LlamaModel::CreateRandom(config, device_, at::kFloat, kv,
                                                         static_cast<uint64_t>(s_.seed)));
    }
    LlamaModel* working = master_.get();
    if (dtype_ != at::kFloat) {
      ASSIGN_OR_RETURN(working_copy_, LlamaModel::CreateRandom(master_->config(), device_, dtype_, kv,
                                                               static_cast<uint64_t>(s_.seed)));
      working = working_copy_.get();
    }
    working_ = working;
    ASSIGN_OR_RETURN(optimizer_, FlatAdamW::Create(master_.get(), working_,
                                                   {s_.beta1, s_.beta2, s_.eps, s_.weight_decay, s_.grad_clip,
                                                    s_.flat_parameters}));
    if (!resume_from.empty()) RETURN_IF_ERROR(LoadState(resume_from));

    if (!s_.teacher.empty()) {
      ASSIGN_OR_RETURN(teacher_, LlamaModel::Load(s_.teacher, device_, dtype_, kv));
      if (teacher_->config().vocab_size != master_->config().vocab_size)
        return absl::InvalidArgumentError(absl::StrCat(
            s_.config_file, ": training.distill.teacher: ", s_.teacher, " has vocab_size ",
            teacher_->config().vocab_size, ", the student ", master_->config().vocab_size));
      for (auto& [name, t] : teacher_->NamedParameters()) t.requires_grad_(false);
    }

    const ModelConfig& c = master_->config();
    std::printf("model: %lld layers, hidden %lld, %lld heads (%lld kv), intermediate %lld, vocab %lld: "
                "%s parameters (%.1f MB in bf16)\n",
                static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.hidden_size),
                static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.num_key_value_heads),
                static_cast<long long>(c.intermediate_size), static_cast<long long>(c.vocab_size),
                FormatCount(static_cast<double>(optimizer_->numel())).c_str(), optimizer_->numel() * 2 / 1e6);
    std::printf("training: %s, %s%s, batch %lld x %lld tokens, %lld steps%s%s\n", device_.str().c_str(),
                dtype_ == at::kFloat ? "float32" : "bfloat16 (fp32 master weights)",
                optimizer_->aliased() ? "" : " [per-tensor updates]", static_cast<long long>(s_.batch_size),
                static_cast<long long>(s_.seq_len), static_cast<long long>(s_.steps),
                teacher_ ? absl::StrFormat(", distilling from %s (alpha %g)", s_.teacher, s_.alpha).c_str() : "",
                done_ > 0 ? absl::StrFormat(", resuming at step %lld", static_cast<long long>(done_)).c_str() : "");
    std::fflush(stdout);
    return absl::OkStatus();
  }

  absl::Status LoadState(const fs::path& dir) {
    const std::string state_path = (dir / kStateFile).string();
    YAML::Node state;
    try {
      state = YAML::LoadFile(state_path);
      done_ = state["step"].as<int64_t>();
      for (const auto& r : state["log"]) {
        LogRow row;
        row.step = r["step"].as<int64_t>();
        row.loss = YamlDouble(r["train_loss"]);
        row.ce = YamlDouble(r["train_ce"]);
        row.lr = YamlDouble(r["lr"]);
        row.tokens_per_sec = YamlDouble(r["tokens_per_sec"]);
        row.valid_ppl = YamlDouble(r["valid_ppl"]);
        if (row.step <= done_) rows_.push_back(row);
      }
    } catch (const YAML::Exception& e) {
      return absl::DataLossError(absl::StrCat(state_path, ": ", ErrorText(e)));
    }
    const std::string opt_path = (dir / kOptimizerFile).string();
    ASSIGN_OR_RETURN(auto tensors, ReadSafetensors(opt_path));
    return optimizer_->LoadState(tensors, opt_path);
  }

  absl::Status WriteCheckpoint() {
    const fs::path final_dir = fs::path(s_.output) / kCheckpointDir;
    const fs::path tmp = fs::path(s_.output) / (std::string(kCheckpointDir) + ".tmp");
    const fs::path old = fs::path(s_.output) / (std::string(kCheckpointDir) + ".old");
    std::error_code ec;
    RemoveTree(tmp.string());
    fs::create_directories(tmp, ec);
    if (ec) return absl::InternalError(absl::StrCat(tmp.string(), ": ", ec.message()));
    optimizer_->SyncMaster();
    RETURN_IF_ERROR(master_->Save(tmp.string(), at::kFloat));
    RETURN_IF_ERROR(WriteSafetensors((tmp / kOptimizerFile).string(), optimizer_->StateTensors()));
    RETURN_IF_ERROR(WriteText((tmp / kStateFile).string(),
                              absl::StrCat("{\n  \"step\": ", done_, ",\n  \"steps\": ", s_.steps,
                                           ",\n  \"seed\": ", s_.seed, ",\n  \"log\": ", RowsJson(rows_), "\n}\n")));
    // checkpoint -> checkpoint.old, checkpoint.tmp -> checkpoint: a crash
    // anywhere leaves a complete checkpoint (or checkpoint.old) to resume from.
    RemoveTree(old.string());
    if (fs::exists(final_dir)) fs::rename(final_dir, old, ec);
    if (ec) return absl::InternalError(absl::StrCat(final_dir.string(), ": ", ec.message()));
    fs::rename(tmp, final_dir, ec);
    if (ec) return absl::InternalError(absl::StrCat(final_dir.string(), ": ", ec.message()));
    RemoveTree(old.string());
    return absl::OkStatus();
  }

  double LearningRate(int64_t step) const {  // 0-based step about to be taken
    if (step < s_.warmup_steps) return s_.lr * static_cast<double>(step + 1) / static_cast<double>(s_.warmup_steps);
    const double total = static_cast<double>(std::max<int64_t>(1, s_.steps - s_.warmup_steps));
    const double progress = std::min(1.0, static_cast<double>(step - s_.warmup_steps) / total);
    return s_.min_lr + 0.5 * (s_.lr - s_.min_lr) * (1.0 + std::cos(M_PI * progress));
  }

  // Windows of seq_len + 1 tokens at `offsets` (long, on device): [n, T + 1] long.
  at::Tensor Windows(const at::Tensor& stream, const at::Tensor& offsets) const {
    at::Tensor index = offsets.unsqueeze(1) + window_;
    return stream.index_select(0, index.reshape(-1)).reshape({offsets.size(0), s_.seq_len + 1}).to(at::kLong);
  }

  // Random window offsets of step `step`: a pure function of (seed, step), so
  // a resumed run draws the batches an uninterrupted one would have drawn.
  at::Tensor SampleOffsets(int64_t step) const {
    const int64_t range = train_.numel() - s_.seq_len;  // windows start in [0, range)
    at::TensorOptions options = at::TensorOptions().dtype(at::kLong);
    if (device_.is_cuda()) options = options.pinned_memory(true);
    at::Tensor host = at::empty({s_.batch_size}, options);
    int64_t* out = host.data_ptr<int64_t>();
    std::mt19937_64 rng(SplitMix64(SplitMix64(static_cast<uint64_t>(s_.seed)) ^ static_cast<uint64_t>(step)));
    for (int64_t i = 0; i < s_.batch_size; ++i) out[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(range));
    return device_.is_cuda() ? host.to(device_, at::kLong, /*non_blocking=*/true) : host;
  }

  // Perplexity of `model` over the windows at `offsets` (one host sync).
  double Perplexity(const at::Tensor& stream, const at::Tensor& offsets) {
    c10::NoGradGuard no_grad;
    const int64_t n = offsets.size(0);
    at::Tensor total = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(device_));
    for (int64_t begin = 0; begin < n; begin += s_.batch_size) {
      at::Tensor w = Windows(stream, offsets.narrow(0, begin, std::min(s_.batch_size, n - begin)));
      at::Tensor x = w.narrow(1, 0, s_.seq_len).contiguous();
      at::Tensor y = w.narrow(1, 1, s_.seq_len).reshape(-1);
      at::Tensor logits = working_->ForwardTraining(x);
      if (!logits.defined()) return NAN;  // the model printed why
      at::Tensor logp = at::log_softmax(logits.reshape({-1, logits.size(-1)}), -1, at::kFloat);
      total.add_(at::nll_loss(logp, y, {}, at::Reduction::Sum));
    }
    return std::exp(total.item<double>() / static_cast<double>(n * s_.seq_len));
  }

  // Every non-overlapping window of `stream`.
  double FullPerplexity(const at::Tensor& stream) {
    const int64_t count = (stream.numel() - 1) / s_.seq_len;
    at::Tensor offsets = at::arange(count, at::TensorOptions().dtype(at::kLong).device(device_)) * s_.seq_len;
    return Perplexity(stream, offsets);
  }

  // A progress line rewrites itself in place on a terminal (\r) and is an
  // ordinary line otherwise; other lines always keep the last progress line.
  void PrintLine(const std::string& line, bool progress) {
    if (tty_ && progress) {
      std::printf("\r%s\033[K", line.c_str());
      progress_pending_ = true;
    } else {
      EndProgress();
      std::printf("%s\n", line.c_str());
    }
    std::fflush(stdout);
  }

  void EndProgress() {
    if (tty_ && progress_pending_) std::printf("\n");
    progress_pending_ = false;
  }

  absl::Status Train() {
    const int64_t T = s_.seq_len;
    const int64_t V = master_->config().vocab_size;
    const int64_t start = done_;
    const auto run_start = Clock::now();
    auto interval_start = Clock::now();
    int64_t interval_first = done_;
    double train_seconds = 0.0;
    const auto acc_options = at::TensorOptions().dtype(at::kFloat).device(device_);
    at::Tensor loss_sum = at::zeros({}, acc_options);
    at::Tensor ce_sum = at::zeros({}, acc_options);
    optimizer_->ZeroGrad();

    while (done_ < s_.steps) {
      const int64_t step = done_;
      const double lr = LearningRate(step);
      at::Tensor w = Windows(train_, SampleOffsets(step));
      at::Tensor x = w.narrow(1, 0, T).contiguous();
      at::Tensor y = w.narrow(1, 1, T).reshape(-1);
      at::Tensor logits = working_->ForwardTraining(x);
      if (!logits.defined())
        return absl::InternalError(absl::StrCat("step ", step + 1, ": the model's forward pass failed (see above)"));
      at::Tensor logp = at::log_softmax(logits.reshape({-1, V}), -1, at::kFloat);
      logits = at::Tensor();
      at::Tensor ce = at::nll_loss(logp, y);
      at::Tensor loss = ce;
      if (teacher_) {
        at::Tensor teacher_logp;
        {
          c10::NoGradGuard no_grad;
          at::Tensor teacher_logits = teacher_->ForwardTraining(x);
          if (!teacher_logits.defined())
            return absl::InternalError(
                absl::StrCat("step ", step + 1, ": the teacher's forward pass failed (see above)"));
          teacher_logp = at::log_softmax(teacher_logits.reshape({-1, V}), -1, at::kFloat);
        }
        // KL(teacher || student), summed over the vocabulary, averaged over tokens.
        at::Tensor kl = (teacher_logp.exp() * (teacher_logp - logp)).sum(-1).mean();
        loss = s_.alpha >= 1.0 ? kl : kl * s_.alpha + ce * (1.0 - s_.alpha);
      }
      loss.backward();
      optimizer_->Step(lr, step + 1);
      optimizer_->ZeroGrad();
      loss_sum.add_(loss.detach());
      ce_sum.add_(ce.detach());
      ++done_;

      const double elapsed_run = std::chrono::duration<double>(Clock::now() - run_start).count();
      const bool stopping = done_ < s_.steps && ((s_.run_steps > 0 && done_ - start >= s_.run_steps) ||
                                                 (s_.time_limit_s > 0 && elapsed_run >= s_.time_limit_s));
      const bool eval_now = (s_.eval_every > 0 && done_ % s_.eval_every == 0) || done_ == s_.steps;
      const bool checkpoint_now =
          stopping || done_ == s_.steps || (s_.checkpoint_every > 0 && done_ % s_.checkpoint_every == 0);
      if (done_ % s_.log_every != 0 && !eval_now && !checkpoint_now) continue;

      // Logging: the only host syncs of the loop.
      LogRow row;
      row.step = done_;
      const int64_t n = done_ - interval_first;
      const at::Tensor sums = at::stack({loss_sum, ce_sum}).to(at::kCPU, at::kDouble);
      row.loss = sums[0].item<double>() / static_cast<double>(n);
      row.ce = sums[1].item<double>() / static_cast<double>(n);
      row.lr = lr;
      const double seconds = std::chrono::duration<double>(Clock::now() - interval_start).count();
      train_seconds += seconds;
      row.tokens_per_sec = static_cast<double>(n * s_.batch_size * T) / std::max(seconds, 1e-9);
      loss_sum.zero_();
      ce_sum.zero_();
      if (!std::isfinite(row.loss)) {
        EndProgress();
        return absl::InternalError(absl::StrFormat("training diverged: the loss is %g at step %d (lr %g)",
                                                   row.loss, done_, lr));
      }
      const double eta = static_cast<double>(s_.steps - done_) * train_seconds / static_cast<double>(done_ - start);
      std::string line = absl::StrFormat("step %d/%d | loss %.4f", done_, s_.steps, row.loss);
      if (teacher_) absl::StrAppend(&line, absl::StrFormat(" (ce %.4f)", row.ce));
      absl::StrAppend(&line, absl::StrFormat(" | lr %.2e | %s tok/s | ETA %s", lr,
                                             FormatCount(row.tokens_per_sec), FormatDuration(eta)));
      PrintLine(line, /*progress=*/true);
      if (eval_now) {
        row.valid_ppl = Perplexity(valid_, valid_offsets_);
        PrintLine(absl::StrFormat("step %d/%d | valid ppl %.3f (loss %.4f)", done_, s_.steps, row.valid_ppl,
                                  std::log(row.valid_ppl)),
                  /*progress=*/false);
      }
      rows_.push_back(row);
      if (checkpoint_now) {
        EndProgress();
        RETURN_IF_ERROR(WriteCheckpoint());
        RETURN_IF_ERROR(WriteLogs(NAN, NAN));
      }
      if (stopping) {
        EndProgress();
        std::printf("stopped at step %lld of %lld (%s); run again with resume: true to continue\n",
                    static_cast<long long>(done_), static_cast<long long>(s_.steps),
                    s_.run_steps > 0 && done_ - start >= s_.run_steps ? "training.run_steps"
                                                                       : "training.time_limit_s");
        std::fflush(stdout);
        return absl::OkStatus();
      }
      interval_first = done_;
      interval_start = Clock::now();
    }
    EndProgress();
    return absl::OkStatus();
  }

  absl::Status WriteLogs(double valid_ppl, double test_ppl) {
    std::string csv = "step,train_loss,train_ce,lr,tokens_per_sec,valid_ppl\n";
    double token_rate_sum = 0;
    int64_t token_rate_count = 0;
    for (const LogRow& r : rows_) {
      absl::StrAppend(&csv, r.step, ",", CsvNumber(r.loss), ",", CsvNumber(r.ce), ",", CsvNumber(r.lr), ",",
                      CsvNumber(r.tokens_per_sec), ",", CsvNumber(r.valid_ppl), "\n");
      if (std::isfinite(r.tokens_per_sec)) {
        token_rate_sum += r.tokens_per_sec;
        ++token_rate_count;
      }
    }
    RETURN_IF_ERROR(WriteText(OutputPath("training_log.csv"), csv));
    const std::string json = absl::StrCat(
        "{\n  \"steps\": ", done_, ",\n  \"parameters\": ", optimizer_->numel(), ",\n  \"batch_size\": ",
        s_.batch_size, ",\n  \"seq_len\": ", s_.seq_len, ",\n  \"device\": ", JsonString(device_.str()),
        ",\n  \"dtype\": ", JsonString(dtype_ == at::kFloat ? "float32" : "bfloat16"),
        ",\n  \"mean_tokens_per_sec\": ", JsonNumber(token_rate_count ? token_rate_sum / token_rate_count : NAN),
        ",\n  \"final_valid_ppl\": ", JsonNumber(valid_ppl), ",\n  \"final_test_ppl\": ", JsonNumber(test_ppl),
        ",\n  \"log\": ", RowsJson(rows_), "\n}\n");
    return WriteText(OutputPath("training_log.json"), json);
  }

  absl::Status Finish() {
    const double valid_ppl = FullPerplexity(valid_);
    const double test_ppl = test_.defined() ? FullPerplexity(test_) : NAN;
    if (test_.defined()) {
      std::printf("final perplexity: valid %.3f, test %.3f\n", valid_ppl, test_ppl);
    } else {
      std::printf("final perplexity: valid %.3f (no data.test)\n", valid_ppl);
    }

    const at::ScalarType save_dtype = s_.save_dtype == "float32" ? at::kFloat : at::kBFloat16;
    optimizer_->SyncMaster();
    RETURN_IF_ERROR(master_->Save(s_.output, save_dtype));
    ModelConfig config = master_->config();
    config.torch_dtype = s_.save_dtype;
    RETURN_IF_ERROR(config.WriteJsonFile(OutputPath("config.json")));
    std::error_code ec;
    const std::string tokenizer_copy = OutputPath("tokenizer.model");
    if (!fs::exists(tokenizer_copy) || !fs::equivalent(s_.tokenizer_path, tokenizer_copy, ec))
      fs::copy_file(s_.tokenizer_path, tokenizer_copy, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(absl::StrCat(tokenizer_copy, ": cannot copy the tokenizer: ", ec.message()));
    RETURN_IF_ERROR(WriteLogs(valid_ppl, test_ppl));
    std::printf("wrote %s (model.safetensors in %s, config.json, tokenizer.model, training_log.json/.csv)\n",
                s_.output.c_str(), s_.save_dtype.c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }

  Settings s_;
  c10::Device device_{c10::kCPU};
  at::ScalarType dtype_ = at::kFloat;
  bool tty_ = false;
  bool progress_pending_ = false;
  std::unique_ptr<Tokenizer> tokenizer_;
  at::Tensor train_, valid_, test_;  // int32 token streams on device_
  at::Tensor window_;                // arange(seq_len + 1)
  at::Tensor valid_offsets_;
  std::unique_ptr<LlamaModel> master_;        // fp32 weights (saved, checkpointed)
  std::unique_ptr<LlamaModel> working_copy_;  // bf16 copy that runs forward/backward (mixed precision)
  LlamaModel* working_ = nullptr;             // master_ or working_copy_
  std::unique_ptr<LlamaModel> teacher_;
  std::unique_ptr<FlatAdamW> optimizer_;
  std::vector<LogRow> rows_;
  int64_t done_ = 0;  // completed steps
};

}  // namespace

absl::Status RunTraining(const std::string& config_path, const std::vector<std::string>& overrides) {
  if (IsAcceptanceHeadConfig(config_path)) return RunAcceptanceHeadTraining(config_path, overrides);
  if (IsDraftHeadConfig(config_path)) return RunDraftHeadTraining(config_path, overrides);
  try {
    ASSIGN_OR_RETURN(Settings settings, ParseSettings(config_path, overrides));
    Trainer trainer(std::move(settings));
    return trainer.Run();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("training failed in LibTorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("training failed: ", ErrorText(e)));
  }
}

}  // namespace speclab
