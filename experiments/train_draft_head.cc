#include "experiments/train_draft_head.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "drafters/eagle/eagle_head.h"
#include "drafters/hydra/hydra_drafter.h"
#include "drafters/kangaroo/kangaroo_adapter.h"
#include "drafters/medusa/medusa_drafter.h"
#include "experiments/corpus_windows.h"
#include "experiments/head_training.h"
#include "experiments/model_loading.h"
#include "experiments/progress.h"
#include "framework/core/file_util.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/model/llama_model.h"
#include "framework/model/safetensors.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {
namespace {

constexpr int kEagleEvalDepths = 4;

struct HeadSettings {
  std::string kind;  // "eagle_head", "eagle3_head", "medusa_head", "hydra_head" or "kangaroo_adapter"
  std::string target, output;
  int64_t layers = 1, heads = 4, warmup_steps = 50, checkpoint_every = 100, run_steps = 0;
  // Windows whose target states are computed once and drawn from at every
  // step (0: fresh windows and a target forward every step).
  int64_t feature_cache_windows = 0;
  std::vector<int> feature_layers;  // eagle3_head: the fused layers (empty: EAGLE-3's choice)
  int64_t ttt_steps = 4;            // eagle3_head: steps of the training-time test
  int64_t exit_layer = 0;           // kangaroo_adapter: the target layers under the adapter
  bool resume = true;
  double feature_noise = 0.2, token_weight = 0.1, decay = 0.8, grad_clip = 0.5;
  CorpusData data;
  TrainingBasics run;
};

absl::Status ParseHeadSection(Options& head, HeadSettings& s) {
  ASSIGN_OR_RETURN(std::string target, head.GetString("target"));
  s.target = head.ResolvePath(target);
  if (s.kind == "kangaroo_adapter") {  // one attention block: no layers to choose
    ASSIGN_OR_RETURN(s.exit_layer, head.GetInt("exit_layer"));
    return head.CheckAllUsed();
  }
  ASSIGN_OR_RETURN(s.layers, head.GetInt("layers", s.layers));
  if (s.kind == "eagle3_head") {
    if (s.layers < 1 || s.layers > 64) return head.Error("layers", "expected an integer in [1, 64]");
    if (head.Has("feature_layers")) {
      ASSIGN_OR_RETURN(std::vector<int64_t> listed, head.GetIntList("feature_layers"));
      if (listed.size() < 2) return head.Error("feature_layers", "expected two or more layers to fuse");
      s.feature_layers.assign(listed.begin(), listed.end());
    }
    ASSIGN_OR_RETURN(s.ttt_steps, head.GetInt("ttt_steps", s.ttt_steps));
    if (s.ttt_steps < 1 || s.ttt_steps > 16) return head.Error("ttt_steps", "expected an integer in [1, 16]");
    ASSIGN_OR_RETURN(s.decay, head.GetDouble("decay", s.decay));
    if (!(s.decay > 0 && s.decay <= 1)) return head.Error("decay", "expected a number in (0, 1]");
  } else if (s.kind == "eagle_head") {
    if (s.layers < 1 || s.layers > 64) return head.Error("layers", "expected an integer in [1, 64]");
    ASSIGN_OR_RETURN(s.feature_noise, head.GetDouble("feature_noise", s.feature_noise));
    if (!(s.feature_noise >= 0)) return head.Error("feature_noise", "expected a number >= 0");
    ASSIGN_OR_RETURN(s.token_weight, head.GetDouble("token_weight", s.token_weight));
    if (!(s.token_weight >= 0)) return head.Error("token_weight", "expected a number >= 0");
  } else {
    const int64_t min_layers = s.kind == "hydra_head" ? 1 : 0;  // Hydra's first ResBlock reads the path
    if (s.layers < min_layers || s.layers > 16)
      return head.Error("layers", absl::StrCat("expected an integer in [", min_layers, ", 16]"));
    ASSIGN_OR_RETURN(s.heads, head.GetInt("heads", s.heads));
    if (s.heads < 1 || s.heads > 64) return head.Error("heads", "expected an integer in [1, 64]");
    ASSIGN_OR_RETURN(s.decay, head.GetDouble("decay", s.decay));
    if (!(s.decay > 0 && s.decay <= 1)) return head.Error("decay", "expected a number in (0, 1]");
  }
  return head.CheckAllUsed();
}

absl::StatusOr<HeadSettings> ParseHeadSettings(const std::string& path, const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(Options root, Options::FromFileWithOverrides(path, overrides));
  HeadSettings s;
  s.kind = root.Has("eagle_head")         ? "eagle_head"
           : root.Has("eagle3_head")      ? "eagle3_head"
           : root.Has("hydra_head")       ? "hydra_head"
           : root.Has("kangaroo_adapter") ? "kangaroo_adapter"
                                          : "medusa_head";
  ASSIGN_OR_RETURN(Options head, root.GetMap(s.kind));
  RETURN_IF_ERROR(ParseHeadSection(head, s));

  const int64_t min_len = s.kind == "eagle_head"         ? kEagleEvalDepths + 2
                          : s.kind == "eagle3_head"      ? std::max<int64_t>(kEagleEvalDepths, s.ttt_steps) + 2
                          : s.kind == "kangaroo_adapter" ? 2
                                                         : s.heads + 2;
  ASSIGN_OR_RETURN(s.data, ParseCorpusData(root, min_len));
  ASSIGN_OR_RETURN(Options training, root.GetMap("training"));
  RETURN_IF_ERROR(ParseTrainingBasics(training, s.run));
  ASSIGN_OR_RETURN(s.warmup_steps, training.GetInt("warmup_steps", s.warmup_steps));
  ASSIGN_OR_RETURN(s.grad_clip, training.GetDouble("grad_clip", s.grad_clip));
  ASSIGN_OR_RETURN(s.checkpoint_every, training.GetInt("checkpoint_every", s.checkpoint_every));
  if (s.checkpoint_every < 0) return training.Error("checkpoint_every", "expected an integer >= 0 (0: only on Ctrl-C)");
  ASSIGN_OR_RETURN(s.run_steps, training.GetInt("run_steps", s.run_steps));
  if (s.run_steps < 0) return training.Error("run_steps", "expected an integer >= 0 (0: to the end)");
  if (s.warmup_steps < 0) return training.Error("warmup_steps", "expected an integer >= 0");
  ASSIGN_OR_RETURN(s.feature_cache_windows, training.GetInt("feature_cache_windows", s.feature_cache_windows));
  if (s.feature_cache_windows != 0 && s.feature_cache_windows < s.run.batch_size)
    return training.Error("feature_cache_windows",
                          absl::StrCat("expected 0 (no cache) or at least batch_size (", s.run.batch_size, ")"));
  if (!(s.grad_clip >= 0)) return training.Error("grad_clip", "expected a number >= 0 (0: off)");
  RETURN_IF_ERROR(training.CheckAllUsed());

  ASSIGN_OR_RETURN(std::string output, root.GetString("output"));
  s.output = root.ResolvePath(output);
  ASSIGN_OR_RETURN(s.resume, root.GetBool("resume", s.resume));
  RETURN_IF_ERROR(root.CheckAllUsed());
  return s;
}

// A batch of windows and what the frozen target says of them.
struct Targets {
  at::Tensor tokens;    // [B, T] int64
  at::Tensor features;  // [B, T, hidden]: the target's final-norm states
  at::Tensor probs;     // [B, T, vocab] float32: the target's law after each position (where asked for)
  std::vector<at::Tensor> layers;  // [B, T, hidden] each: the hidden states HeadRecipe::FeatureLayers() names
};

// A loss and its named parts, for the log.
struct Loss {
  at::Tensor total;
  std::vector<std::pair<std::string, at::Tensor>> parts;
};

// How one kind of head is built, trained, scored and saved.
class HeadRecipe {
 public:
  virtual ~HeadRecipe() = default;
  virtual std::string Describe() const = 0;
  virtual std::vector<at::Tensor> Parameters() = 0;
  // Whether TrainingLoss reads Targets::probs (Evaluate always does).
  virtual bool TrainsOnTargetLaws() const = 0;
  // The target's hidden states the head reads besides the final norm's (Targets::layers).
  virtual std::vector<int> FeatureLayers() const { return {}; }
  virtual Loss TrainingLoss(const Targets& batch, at::Generator& noise) = 0;
  // Prints the held-out numbers and returns them as JSON.
  virtual std::string Evaluate(const Targets& batch) = 0;
  virtual absl::Status Save(const std::string& path) const = 0;
};

// Agreement with the target's greedy token and sum_v min(p, q), over all positions.
std::pair<double, double> Scores(const at::Tensor& q, const at::Tensor& p) {
  const double agree = (q.argmax(-1) == p.argmax(-1)).to(at::kDouble).mean().item<double>();
  const double accept = at::minimum(q, p).sum(-1).to(at::kDouble).mean().item<double>();
  return {agree, accept};
}

class EagleRecipe final : public HeadRecipe {
 public:
  EagleRecipe(const HeadSettings& s, const LlamaModel& target, EagleHead head)
      : s_(s), target_(target), head_(std::move(head)) {}

  std::string Describe() const override { return absl::StrCat("eagle head: ", s_.layers, " layer(s)"); }

  bool TrainsOnTargetLaws() const override { return true; }

  std::vector<at::Tensor> Parameters() override {
    std::vector<at::Tensor> params = {head_.fc_weight, head_.fc_bias};
    for (auto& [name, tensor] : head_.body->NamedParameters())
      if (absl::StartsWith(name, "model.layers.")) params.push_back(tensor);
    return params;
  }

  Loss TrainingLoss(const Targets& batch, at::Generator& noise) override {
    at::Tensor inputs = batch.features.narrow(1, 0, s_.data.seq_len - 1);
    if (s_.feature_noise > 0) {
      const at::Tensor u = at::rand(inputs.sizes(), noise, at::TensorOptions().dtype(at::kFloat));
      inputs = inputs + (u.to(inputs.device()) * 2 - 1) * s_.feature_noise;
    }
    return Losses(batch, Predict(batch, inputs));
  }

  std::string Evaluate(const Targets& batch) override {
    const int64_t n = s_.data.seq_len - 1;
    at::Tensor inputs = batch.features.narrow(1, 0, n);
    at::Tensor predicted = Predict(batch, inputs);
    const Loss loss = Losses(batch, predicted);
    std::printf("held out (%lld windows): feature loss %.4f, token loss %.4f\n",
                static_cast<long long>(s_.run.eval_windows), loss.parts[0].second.item<double>(),
                loss.parts[1].second.item<double>());
    const at::Tensor p = batch.probs.narrow(1, 1, n);
    std::string depths;
    for (int d = 1; d <= kEagleEvalDepths; ++d) {
      // Position p's input is the head's depth d - 1 prediction of F_{p-1};
      // scored at positions p >= d, where that chain starts from the target's.
      if (d > 1) predicted = Predict(batch, inputs);
      const at::Tensor q = target_.LmHead(predicted).softmax(-1);
      const auto [agree, accept] = Scores(q.narrow(1, d - 1, n - d + 1), p.narrow(1, d - 1, n - d + 1));
      std::printf("  depth %d: argmax agreement %.3f, acceptance at T = 1 %.3f\n", d, agree, accept);
      absl::StrAppend(&depths, d == 1 ? "" : ", ",
                      absl::StrFormat("{\"depth\": %d, \"agreement\": %.6f, \"acceptance\": %.6f}", d, agree, accept));
      inputs = at::cat({batch.features.narrow(1, 0, 1), predicted.narrow(1, 0, n - 1)}, 1);
    }
    return absl::StrFormat("{\"windows\": %d, \"feature_loss\": %.6f, \"token_loss\": %.6f, \"depths\": [%s]}",
                           s_.run.eval_windows, loss.parts[0].second.item<double>(), loss.parts[1].second.item<double>(),
                           depths);
  }

  absl::Status Save(const std::string& path) const override { return SaveEagleHead(path, head_, at::kBFloat16); }

 private:
  // The head's predictions f^_p, p = 1..T-1, from input features [B, T-1, hidden].
  at::Tensor Predict(const Targets& batch, const at::Tensor& inputs) const {
    return head_.body->ForwardTrainingEmbedded(head_.Fuse(batch.tokens.narrow(1, 1, s_.data.seq_len - 1), inputs), 1);
  }

  // The loss of predictions f^ [B, T-1, hidden] against the target's features and laws.
  Loss Losses(const Targets& batch, const at::Tensor& predicted) const {
    const at::Tensor feature_loss =
        at::smooth_l1_loss(predicted, batch.features.narrow(1, 1, s_.data.seq_len - 1), at::Reduction::Mean);
    const at::Tensor log_q = target_.LmHead(predicted).log_softmax(-1);
    const at::Tensor token_loss = -(batch.probs.narrow(1, 1, s_.data.seq_len - 1) * log_q).sum(-1).mean();
    return {feature_loss + s_.token_weight * token_loss, {{"feature_loss", feature_loss}, {"token_loss", token_loss}}};
  }

  const HeadSettings& s_;
  const LlamaModel& target_;
  EagleHead head_;
};

// Soft cross-entropy of `logits` against the target's law `p` (the loss),
// and KL(p || q) = CE - H(p) (what is logged: 0 for a head that is the target).
std::pair<at::Tensor, at::Tensor> Distillation(const at::Tensor& p, const at::Tensor& logits) {
  const at::Tensor ce = -(p * logits.log_softmax(-1)).sum(-1).mean();
  const at::Tensor entropy = -(p * p.clamp_min(1e-30).log()).sum(-1).mean();
  return {ce, ce.detach() - entropy};
}

// Kangaroo's recipe (docs/algorithms.md §4.16): the adapter, an attention
// block, fed the target's hidden state after its exit layer and read out by
// its final norm and LM head, distilled from the target's law at the same
// position; the target frozen.
class KangarooRecipe final : public HeadRecipe {
 public:
  KangarooRecipe(const HeadSettings& s, const LlamaModel& target, std::unique_ptr<LlamaModel> adapter)
      : s_(s), target_(target), adapter_(std::move(adapter)) {}

  std::string Describe() const override {
    return absl::StrCat("kangaroo adapter: an attention block after layer ", s_.exit_layer, " of ",
                        target_.config().num_hidden_layers);
  }
  bool TrainsOnTargetLaws() const override { return true; }
  std::vector<int> FeatureLayers() const override { return {static_cast<int>(s_.exit_layer)}; }

  std::vector<at::Tensor> Parameters() override { return AdapterParameters(*adapter_, 0); }

  Loss TrainingLoss(const Targets& batch, at::Generator&) override {
    const auto [ce, kl] = Distillation(batch.probs, Logits(batch));
    return {ce, {{"kl", kl}}};
  }

  std::string Evaluate(const Targets& batch) override {
    const auto [agree, accept] = Scores(Logits(batch).softmax(-1), batch.probs);
    std::printf("held out (%lld windows): argmax agreement %.3f, acceptance at T = 1 %.3f\n",
                static_cast<long long>(s_.run.eval_windows), agree, accept);
    return absl::StrFormat("{\"windows\": %d, \"agreement\": %.6f, \"acceptance\": %.6f}", s_.run.eval_windows,
                           agree, accept);
  }

  absl::Status Save(const std::string& path) const override {
    return SaveKangarooAdapter(path, *adapter_, 0, s_.exit_layer, at::kBFloat16);
  }

 private:
  at::Tensor Logits(const Targets& batch) const {
    return target_.LmHead(adapter_->ForwardTrainingEmbedded(batch.layers.at(0), 0));
  }

  const HeadSettings& s_;
  const LlamaModel& target_;
  std::unique_ptr<LlamaModel> adapter_;
};

// EAGLE-3's recipe (docs/algorithms.md §4.14): the head reads the fusion of
// the target's feature layers and is trained by the training-time test: it
// is unrolled `ttt_steps` times as it drafts, step j fed its own step j - 1
// predictions, and each step's readout is fitted to the target's law
// (soft cross-entropy, weighted decay^(j-1)); no feature is regressed.
class Eagle3Recipe final : public HeadRecipe {
 public:
  Eagle3Recipe(const HeadSettings& s, const LlamaModel& target, EagleHead head)
      : s_(s), target_(target), head_(std::move(head)) {}

  std::string Describe() const override {
    return absl::StrCat("eagle3 head: ", s_.layers, " layer(s) on target layers ",
                        absl::StrJoin(head_.feature_layers, ", "), "; training-time test of ", s_.ttt_steps, " steps");
  }

  bool TrainsOnTargetLaws() const override { return true; }
  std::vector<int> FeatureLayers() const override { return head_.feature_layers; }

  std::vector<at::Tensor> Parameters() override {
    std::vector<at::Tensor> params = {head_.fc_weight, head_.fc_bias, head_.fuse_weight};
    for (auto& [name, tensor] : head_.body->NamedParameters())
      if (absl::StartsWith(name, "model.layers.")) params.push_back(tensor);
    return params;
  }

  Loss TrainingLoss(const Targets& batch, at::Generator&) override {
    absl::StatusOr<std::vector<at::Tensor>> predicted = UnrollHead(head_, batch.tokens, batch.layers, s_.ttt_steps);
    TORCH_CHECK(predicted.ok(), std::string(predicted.status().message()));
    Loss loss{.total = at::zeros({}, batch.features.options().dtype(at::kFloat))};
    for (int64_t j = 1; j <= s_.ttt_steps; ++j) {
      const at::Tensor& a = (*predicted)[j - 1];
      const auto [ce, kl] = Distillation(batch.probs.narrow(1, j, a.size(1)), target_.LmHead(a));
      loss.total = loss.total + std::pow(s_.decay, j - 1) * ce;
      loss.parts.emplace_back(absl::StrCat("step", j, "_kl"), kl);
    }
    return loss;
  }

  std::string Evaluate(const Targets& batch) override {
    absl::StatusOr<std::vector<at::Tensor>> predicted = UnrollHead(head_, batch.tokens, batch.layers, kEagleEvalDepths);
    TORCH_CHECK(predicted.ok(), std::string(predicted.status().message()));
    std::printf("held out (%lld windows):\n", static_cast<long long>(s_.run.eval_windows));
    std::string depths;
    for (int d = 1; d <= kEagleEvalDepths; ++d) {
      const at::Tensor& a = (*predicted)[d - 1];
      const at::Tensor q = target_.LmHead(a).softmax(-1);
      const auto [agree, accept] = Scores(q, batch.probs.narrow(1, d, a.size(1)));
      std::printf("  depth %d: argmax agreement %.3f, acceptance at T = 1 %.3f\n", d, agree, accept);
      absl::StrAppend(&depths, d == 1 ? "" : ", ",
                      absl::StrFormat("{\"depth\": %d, \"agreement\": %.6f, \"acceptance\": %.6f}", d, agree, accept));
    }
    return absl::StrFormat("{\"windows\": %d, \"depths\": [%s]}", s_.run.eval_windows, depths);
  }

  absl::Status Save(const std::string& path) const override { return SaveEagleHead(path, head_, at::kBFloat16); }

 private:
  const HeadSettings& s_;
  const LlamaModel& target_;
  EagleHead head_;
};

// Heads that each predict one place further (Medusa's, Hydra's): head k's
// logits at the first n positions (`logits(k, n)`, n = T - 2 - k) against the
// target's law of the token k + 2 places on (agreement and acceptance) and
// the corpus token (top-1 accuracy), printed and returned as JSON.
std::string ScoreHeadsByDepth(const HeadSettings& s, const Targets& batch,
                              const std::function<at::Tensor(int64_t k, int64_t n)>& logits) {
  std::string heads;
  for (int64_t k = 0; k < s.heads; ++k) {
    const int64_t n = s.data.seq_len - 2 - k;
    const at::Tensor q = logits(k, n).softmax(-1);
    const auto [agree, accept] = Scores(q, batch.probs.narrow(1, 1 + k, n));
    const double accuracy = (q.argmax(-1) == batch.tokens.narrow(1, 2 + k, n)).to(at::kDouble).mean().item<double>();
    std::printf("  head %lld (depth %lld): argmax agreement %.3f, acceptance at T = 1 %.3f, top-1 accuracy %.3f\n",
                static_cast<long long>(k), static_cast<long long>(k + 1), agree, accept, accuracy);
    absl::StrAppend(&heads, k == 0 ? "" : ", ",
                    absl::StrFormat("{\"depth\": %d, \"agreement\": %.6f, \"acceptance\": %.6f, \"accuracy\": %.6f}",
                                    k + 1, agree, accept, accuracy));
  }
  return absl::StrFormat("{\"windows\": %d, \"depths\": [%s]}", s.run.eval_windows, heads);
}

class MedusaRecipe final : public HeadRecipe {
 public:
  MedusaRecipe(const HeadSettings& s, const LlamaModel& target) : s_(s), target_(target), heads_(s.heads) {
    const int64_t hidden = target.config().hidden_size;
    const at::TensorOptions options = target.parameter_options();
    for (MedusaHead& head : heads_) {
      for (int64_t l = 0; l < s.layers; ++l) {
        head.weights.push_back(at::zeros({hidden, hidden}, options));  // Medusa's start: the identity
        head.biases.push_back(at::zeros({hidden}, options));
      }
    }
  }

  std::string Describe() const override {
    return absl::StrCat("medusa heads: ", s_.heads, " of ", s_.layers, " ResBlock(s)");
  }

  bool TrainsOnTargetLaws() const override { return false; }  // the corpus tokens are its labels

  std::vector<at::Tensor> Parameters() override {
    std::vector<at::Tensor> params;
    for (MedusaHead& head : heads_) {
      params.insert(params.end(), head.weights.begin(), head.weights.end());
      params.insert(params.end(), head.biases.begin(), head.biases.end());
    }
    return params;
  }

  Loss TrainingLoss(const Targets& batch, at::Generator&) override {
    Loss loss{.total = at::zeros({}, batch.features.options().dtype(at::kFloat))};
    for (int64_t k = 0; k < s_.heads; ++k) {
      const int64_t n = s_.data.seq_len - 2 - k;  // head k at F_t predicts x_{t+2+k}
      const at::Tensor logits = MedusaHeadLogits(heads_[k], target_, batch.features.narrow(1, 0, n));
      const at::Tensor ce = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                                   batch.tokens.narrow(1, 2 + k, n).reshape({-1}));
      loss.total = loss.total + std::pow(s_.decay, k) * ce;
      loss.parts.emplace_back(absl::StrCat("head", k, "_loss"), ce);
    }
    return loss;
  }

  std::string Evaluate(const Targets& batch) override {
    return ScoreHeadsByDepth(s_, batch, [&](int64_t k, int64_t n) {
      return MedusaHeadLogits(heads_[k], target_, batch.features.narrow(1, 0, n));
    });
  }

  absl::Status Save(const std::string& path) const override { return SaveMedusaHeads(path, heads_, at::kBFloat16); }

 private:
  const HeadSettings& s_;
  const LlamaModel& target_;
  std::vector<MedusaHead> heads_;
};

class HydraRecipe final : public HeadRecipe {
 public:
  HydraRecipe(const HeadSettings& s, const LlamaModel& target) : s_(s), target_(target) {
    for (int64_t k = 0; k < s.heads; ++k)
      heads_.push_back(InitialHydraHead(target, static_cast<int>(k), static_cast<int>(s.layers)));
  }

  std::string Describe() const override {
    return absl::StrCat("hydra heads: ", s_.heads, " of ", s_.layers, " ResBlock(s)");
  }

  bool TrainsOnTargetLaws() const override { return true; }  // distilled from the target's laws

  std::vector<at::Tensor> Parameters() override {
    std::vector<at::Tensor> params;
    for (HydraHead& head : heads_) {
      params.insert(params.end(), {head.in_weight, head.in_bias, head.res_weight, head.res_bias});
      params.insert(params.end(), head.weights.begin(), head.weights.end());
      params.insert(params.end(), head.biases.begin(), head.biases.end());
    }
    return params;
  }

  Loss TrainingLoss(const Targets& batch, at::Generator&) override {
    Loss loss{.total = at::zeros({}, batch.features.options().dtype(at::kFloat))};
    for (int64_t k = 0; k < s_.heads; ++k) {
      const int64_t n = s_.data.seq_len - 2 - k;
      const at::Tensor log_q = Logits(batch, k, n).log_softmax(-1);
      const at::Tensor ce = -(batch.probs.narrow(1, 1 + k, n) * log_q).sum(-1).mean();
      loss.total = loss.total + std::pow(s_.decay, k) * ce;
      loss.parts.emplace_back(absl::StrCat("head", k, "_loss"), ce);
    }
    return loss;
  }

  std::string Evaluate(const Targets& batch) override {
    return ScoreHeadsByDepth(s_, batch, [&](int64_t k, int64_t n) { return Logits(batch, k, n); });
  }

  absl::Status Save(const std::string& path) const override { return SaveHydraHeads(path, heads_, at::kBFloat16); }

 private:
  // Head k at F_t, fed the corpus tokens x_{t+1} .. x_{t+1+k} (teacher
  // forcing), for t < n: logits of x_{t+2+k}.
  at::Tensor Logits(const Targets& batch, int64_t k, int64_t n) const {
    std::vector<at::Tensor> inputs{batch.features.narrow(1, 0, n)};
    for (int64_t j = 0; j <= k; ++j) inputs.push_back(target_.Embed(batch.tokens.narrow(1, 1 + j, n)));
    return HydraHeadLogits(heads_[k], target_, at::cat(inputs, -1));
  }

  const HeadSettings& s_;
  const LlamaModel& target_;
  std::vector<HydraHead> heads_;
};

// Bytes as an int32 tensor, and back (safetensors here stores no bytes).
at::Tensor BytesTensor(const std::string& bytes) {
  std::vector<int32_t> values(bytes.begin(), bytes.end());
  return at::tensor(values, at::kInt);
}
std::string TensorBytes(const at::Tensor& t) {
  const at::Tensor values = t.to(at::kInt).contiguous();
  return std::string(values.data_ptr<int32_t>(), values.data_ptr<int32_t>() + values.numel());
}

// What a checkpoint holds besides the parameters: the trainer's state.
struct TrainerState {
  std::vector<at::Tensor>* params;
  std::vector<at::Tensor>* m;
  std::vector<at::Tensor>* v;
  std::mt19937_64* batch_rng;
  at::Generator* noise;
  std::string* log;
};

absl::Status SaveCheckpoint(const std::string& path, int64_t step, const TrainerState& state) {
  std::map<std::string, at::Tensor> tensors;
  for (size_t i = 0; i < state.params->size(); ++i) {
    tensors[absl::StrCat("param.", i)] = (*state.params)[i].detach().to(at::kCPU, at::kFloat);
    tensors[absl::StrCat("adam_m.", i)] = (*state.m)[i].to(at::kCPU, at::kFloat);
    tensors[absl::StrCat("adam_v.", i)] = (*state.v)[i].to(at::kCPU, at::kFloat);
  }
  tensors["step"] = at::full({1}, step, at::kLong);
  std::ostringstream rng;
  rng << *state.batch_rng;
  tensors["batch_rng"] = BytesTensor(rng.str());
  tensors["noise_rng"] = state.noise->get_state().to(at::kInt);
  tensors["log"] = BytesTensor(*state.log);
  const std::string partial = path + ".partial";
  RETURN_IF_ERROR(WriteSafetensors(partial, tensors));
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path, ": cannot write the checkpoint: ", ec.message()));
  return absl::OkStatus();
}

// Restores the state saved at a step; returns that step.
absl::StatusOr<int64_t> LoadCheckpoint(const std::string& path, const TrainerState& state) {
  ASSIGN_OR_RETURN(auto tensors, ReadSafetensors(path));
  auto take = [&](const std::string& name) -> absl::StatusOr<at::Tensor> {
    auto it = tensors.find(name);
    if (it == tensors.end())
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no tensor '", name, "' (the checkpoint is another head's, or not a checkpoint)"));
    return it->second;
  };
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < state.params->size(); ++i) {
    at::Tensor& p = (*state.params)[i];
    for (const auto& [prefix, into] : {std::make_pair("param.", &p), std::make_pair("adam_m.", &(*state.m)[i]),
                                       std::make_pair("adam_v.", &(*state.v)[i])}) {
      ASSIGN_OR_RETURN(at::Tensor saved, take(absl::StrCat(prefix, i)));
      if (saved.sizes() != into->sizes())
        return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", prefix, i, "' has shape [",
                                                       absl::StrJoin(saved.sizes(), ", "), "], this run's [",
                                                       absl::StrJoin(into->sizes(), ", "),
                                                       "]: the checkpoint is another head's"));
      into->copy_(saved);
    }
  }
  if (tensors.count(absl::StrCat("param.", state.params->size())))
    return absl::InvalidArgumentError(absl::StrCat(path, ": more parameters than this run's head: another head's"));
  ASSIGN_OR_RETURN(at::Tensor step, take("step"));
  ASSIGN_OR_RETURN(at::Tensor rng, take("batch_rng"));
  ASSIGN_OR_RETURN(at::Tensor noise, take("noise_rng"));
  ASSIGN_OR_RETURN(at::Tensor log, take("log"));
  std::istringstream(TensorBytes(rng)) >> *state.batch_rng;
  state.noise->set_state(noise.to(at::kByte));
  *state.log = TensorBytes(log);
  return step.item<int64_t>();
}

class HeadTrainer {
 public:
  explicit HeadTrainer(HeadSettings s) : s_(std::move(s)) {}

  absl::Status Run() {
    ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(s_.data.tokenizer));
    ASSIGN_OR_RETURN(device_, ParseDevice(s_.run.device));
    ASSIGN_OR_RETURN(at::Tensor train, CorpusTokens(*tokenizer, s_.data.train, s_.data.seq_len));
    ASSIGN_OR_RETURN(at::Tensor valid, CorpusTokens(*tokenizer, s_.data.valid, s_.data.seq_len));
    train = train.to(device_);
    valid = valid.to(device_);
    ASSIGN_OR_RETURN(target_, LlamaModel::Load(s_.target, device_, at::kFloat, s_.data.seq_len));
    for (auto& [name, tensor] : target_->NamedParameters()) tensor.set_requires_grad(false);
    std::unique_ptr<HeadRecipe> recipe;
    if (s_.kind == "eagle_head") {
      ASSIGN_OR_RETURN(EagleHead head, NewEagleHead(*target_, s_.layers, s_.data.seq_len, s_.run.seed));
      recipe = std::make_unique<EagleRecipe>(s_, *target_, std::move(head));
    } else if (s_.kind == "eagle3_head") {
      std::vector<int> layers = s_.feature_layers;
      if (layers.empty()) {
        ASSIGN_OR_RETURN(layers, Eagle3FeatureLayers(target_->config().num_hidden_layers));
      }
      ASSIGN_OR_RETURN(EagleHead head, NewEagleHead(*target_, s_.layers, s_.data.seq_len, s_.run.seed, layers));
      recipe = std::make_unique<Eagle3Recipe>(s_, *target_, std::move(head));
    } else if (s_.kind == "kangaroo_adapter") {
      // The adapter alone, fed the target's state after the exit layer.
      absl::StatusOr<std::unique_ptr<LlamaModel>> adapter =
          NewKangarooAdapter(*target_, s_.exit_layer, s_.data.seq_len, s_.run.seed);
      if (!adapter.ok())
        return absl::InvalidArgumentError(absl::StrCat("kangaroo_adapter.exit_layer: ", adapter.status().message()));
      recipe = std::make_unique<KangarooRecipe>(s_, *target_, *std::move(adapter));
    } else if (s_.kind == "hydra_head") {
      recipe = std::make_unique<HydraRecipe>(s_, *target_);
    } else {
      recipe = std::make_unique<MedusaRecipe>(s_, *target_);
    }
    std::vector<at::Tensor> params = recipe->Parameters();
    int64_t count = 0;
    std::vector<at::Tensor> m, v;
    for (at::Tensor& p : params) {
      p.set_requires_grad(true);
      count += p.numel();
      m.push_back(at::zeros_like(p).detach());
      v.push_back(at::zeros_like(p).detach());
    }
    std::printf("%s, %lld parameters, on %s; %lld steps of %lld windows x %lld\n", recipe->Describe().c_str(),
                static_cast<long long>(count), device_.str().c_str(), static_cast<long long>(s_.run.steps),
                static_cast<long long>(s_.run.batch_size), static_cast<long long>(s_.data.seq_len));
    std::mt19937_64 rng(s_.run.seed);
    at::Generator noise = at::detail::createCPUGenerator(s_.run.seed + 7);
    std::string log = "{\"steps\": [";
    const std::string checkpoint = s_.output + ".checkpoint.safetensors";
    const TrainerState state{.params = &params, .m = &m, .v = &v, .batch_rng = &rng, .noise = &noise, .log = &log};
    int64_t first_step = 1;
    if (s_.resume && std::filesystem::exists(checkpoint)) {
      ASSIGN_OR_RETURN(const int64_t done, LoadCheckpoint(checkpoint, state));
      first_step = done + 1;
      std::printf("resuming from %s after step %lld\n", checkpoint.c_str(), static_cast<long long>(done));
    }
    // This run stops after run_steps steps (0: at the end), with a checkpoint.
    const int64_t stop_after = s_.run_steps > 0 ? std::min(s_.run.steps, first_step - 1 + s_.run_steps) : s_.run.steps;
    if (s_.feature_cache_windows > 0) RETURN_IF_ERROR(CacheFeatures(train, recipe->FeatureLayers()));
    StopOnInterrupt();
    const auto started = std::chrono::steady_clock::now();
    for (int64_t step = first_step; step <= s_.run.steps; ++step) {
      ASSIGN_OR_RETURN(const Targets batch, cache_.tokens.defined()
                                                ? CachedTargets(s_.run.batch_size, rng, recipe->TrainsOnTargetLaws())
                                                : MakeTargets(train, s_.run.batch_size, rng,
                                                              recipe->TrainsOnTargetLaws(), recipe->FeatureLayers()));
      const Loss loss = recipe->TrainingLoss(batch, noise);
      for (at::Tensor& p : params) p.mutable_grad() = at::Tensor();
      loss.total.backward();
      Update(params, m, v, step);
      if (step % s_.run.log_every == 0 || step == s_.run.steps) {
        std::string line = absl::StrFormat("step %5d/%d", step, s_.run.steps), entry = absl::StrFormat("{\"step\": %d", step);
        for (const auto& [name, value] : loss.parts) {
          const double x = value.item<double>();
          absl::StrAppend(&line, absl::StrFormat("  %s %.4f", name, x));
          absl::StrAppend(&entry, absl::StrFormat(", \"%s\": %.6f", name, x));
        }
        // The rate of this run's steps, and the time the rest would take at it.
        const double per_step = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() /
                                static_cast<double>(step - first_step + 1);
        absl::StrAppend(&line, absl::StrFormat("  | %.3f s/step, ETA %.0f s", per_step,
                                               per_step * static_cast<double>(s_.run.steps - step)));
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        absl::StrAppend(&log, step == s_.run.log_every ? "" : ", ", entry, "}");
      }
      const bool stopping = step < s_.run.steps && (Interrupted() || step == stop_after);
      if (stopping || (step < s_.run.steps && s_.checkpoint_every > 0 && step % s_.checkpoint_every == 0))
        RETURN_IF_ERROR(SaveCheckpoint(checkpoint, step, state));
      if (stopping) {
        std::printf("stopped after step %lld of %lld; %s holds the run, and the same command goes on from it\n",
                    static_cast<long long>(step), static_cast<long long>(s_.run.steps), checkpoint.c_str());
        if (Interrupted()) return absl::CancelledError(absl::StrCat("interrupted: ", checkpoint, " holds the run"));
        return absl::OkStatus();
      }
    }
    for (at::Tensor& p : params) p.set_requires_grad(false);
    std::string held_out;
    {
      c10::NoGradGuard no_grad;
      std::mt19937_64 eval_rng(s_.run.seed + 1);
      ASSIGN_OR_RETURN(const Targets batch,
                       MakeTargets(valid, s_.run.eval_windows, eval_rng, /*with_probs=*/true, recipe->FeatureLayers()));
      held_out = recipe->Evaluate(batch);
    }
    absl::StrAppend(&log, "], \"held_out\": ", held_out, "}\n");
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(s_.output).parent_path(), ec);
    if (ec) return absl::InternalError(absl::StrCat(s_.output, ": cannot create its folder: ", ec.message()));
    RETURN_IF_ERROR(recipe->Save(s_.output));
    RETURN_IF_ERROR(WriteFileAtomically(s_.output + ".log.json", log));
    std::filesystem::remove(checkpoint, ec);  // the run is done
    std::printf("wrote %s (and %s.log.json)\n", s_.output.c_str(), s_.output.c_str());
    return absl::OkStatus();
  }

 private:
  double LearningRate(int64_t step) const {
    if (step <= s_.warmup_steps) return s_.run.lr * step / std::max<int64_t>(1, s_.warmup_steps);
    const double progress =
        static_cast<double>(step - s_.warmup_steps) / std::max<int64_t>(1, s_.run.steps - s_.warmup_steps);
    return s_.run.lr * (0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * progress)));
  }

  // Adam (0.9, 0.95) with bias correction, after clipping the gradients' global norm.
  void Update(std::vector<at::Tensor>& params, std::vector<at::Tensor>& m, std::vector<at::Tensor>& v,
              int64_t step) const {
    c10::NoGradGuard no_grad;
    double scale = 1;
    if (s_.grad_clip > 0) {
      std::vector<at::Tensor> norms;
      for (const at::Tensor& p : params) norms.push_back(p.grad().pow(2).sum());
      const double norm = std::sqrt(at::stack(norms).sum().item<double>());
      if (norm > s_.grad_clip) scale = s_.grad_clip / norm;
    }
    const double lr = LearningRate(step), b1 = 0.9, b2 = 0.95;
    const double correction = std::sqrt(1 - std::pow(b2, step)) / (1 - std::pow(b1, step));
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor g = params[i].grad() * scale;
      m[i].mul_(b1).add_(g, 1 - b1);
      v[i].mul_(b2).addcmul_(g, g, 1 - b2);
      params[i].addcdiv_(m[i], v[i].sqrt().add_(1e-8), -lr * correction);
    }
  }

  // Random windows of `tokens` and the target's states on them.
  absl::StatusOr<Targets> MakeTargets(const at::Tensor& tokens, int64_t windows, std::mt19937_64& rng,
                                      bool with_probs, std::vector<int> layers) {
    return TargetsOf(RandomWindows(tokens, windows, s_.data.seq_len, rng), with_probs, std::move(layers));
  }

  // The feature cache: feature_cache_windows random windows of the training
  // tokens (drawn with their own seed, so a resumed run rebuilds the same
  // cache) and the target's states on them, computed batch by batch and kept
  // on the training device. Laws are not kept: CachedTargets reads them out
  // of the final states, one matmul, where a recipe asks.
  absl::Status CacheFeatures(const at::Tensor& tokens, const std::vector<int>& layers) {
    const auto started = std::chrono::steady_clock::now();
    std::mt19937_64 cache_rng(s_.run.seed + 3);
    std::vector<Targets> parts;
    for (int64_t done = 0; done < s_.feature_cache_windows; done += s_.run.batch_size) {
      const int64_t windows = std::min(s_.run.batch_size, s_.feature_cache_windows - done);
      ASSIGN_OR_RETURN(Targets part, MakeTargets(tokens, windows, cache_rng, /*with_probs=*/false, layers));
      parts.push_back(std::move(part));
    }
    auto cat = [&](auto member) {
      std::vector<at::Tensor> pieces;
      for (const Targets& part : parts) pieces.push_back(member(part));
      return at::cat(pieces);
    };
    cache_.tokens = cat([](const Targets& t) { return t.tokens; });
    cache_.features = cat([](const Targets& t) { return t.features; });
    for (size_t i = 0; i < layers.size(); ++i) cache_.layers.push_back(cat([&](const Targets& t) { return t.layers[i]; }));
    int64_t bytes = cache_.features.nbytes();
    for (const at::Tensor& layer : cache_.layers) bytes += layer.nbytes();
    std::printf("feature cache: the target's states on %lld windows x %lld tokens (%.0f MiB on %s) in %.1f s\n",
                static_cast<long long>(s_.feature_cache_windows), static_cast<long long>(s_.data.seq_len),
                static_cast<double>(bytes) / (1 << 20), device_.str().c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return absl::OkStatus();
  }

  // A batch of cached windows, drawn uniformly (with replacement) by `rng`.
  Targets CachedTargets(int64_t windows, std::mt19937_64& rng, bool with_probs) {
    c10::NoGradGuard no_grad;
    std::uniform_int_distribution<int64_t> pick(0, cache_.tokens.size(0) - 1);
    std::vector<int64_t> rows(windows);
    for (int64_t& row : rows) row = pick(rng);
    const at::Tensor index = at::tensor(rows, at::TensorOptions().dtype(at::kLong)).to(device_);
    Targets out;
    out.tokens = cache_.tokens.index_select(0, index);
    out.features = cache_.features.index_select(0, index);
    for (const at::Tensor& layer : cache_.layers) out.layers.push_back(layer.index_select(0, index));
    if (with_probs) out.probs = target_->LmHead(out.features).softmax(-1);
    return out;
  }

  // The target's states on windows [B, T]: the layers asked for, the final
  // norm's output, and where asked, its law after each position.
  absl::StatusOr<Targets> TargetsOf(at::Tensor windows, bool with_probs, std::vector<int> layers) {
    c10::NoGradGuard no_grad;
    Targets out;
    out.tokens = std::move(windows);
    const int64_t t = s_.data.seq_len;
    const at::TensorOptions on = at::TensorOptions().device(device_);
    layers.push_back(-1);  // the final norm's output last
    ASSIGN_OR_RETURN(out.layers, target_->ForwardTrainingLayers(target_->Embed(out.tokens),
                                                                at::arange(t, on.dtype(at::kLong)),
                                                                at::ones({t, t}, on.dtype(at::kBool)).tril(), layers));
    out.features = out.layers.back();
    out.layers.pop_back();
    if (with_probs) out.probs = target_->LmHead(out.features).softmax(-1);
    return out;
  }

  const HeadSettings s_;
  c10::Device device_ = c10::Device(c10::kCPU);
  std::unique_ptr<LlamaModel> target_;
  Targets cache_;  // the feature cache (CacheFeatures); empty where off
};

}  // namespace

bool IsDraftHeadConfig(const std::string& config_path) {
  return ConfigHasSection(config_path, {"eagle_head", "eagle3_head", "medusa_head", "hydra_head", "kangaroo_adapter"});
}

absl::Status RunDraftHeadTraining(const std::string& config_path, const std::vector<std::string>& overrides) {
  return RunTrainingGuarded([&]() -> absl::Status {
    ASSIGN_OR_RETURN(HeadSettings settings, ParseHeadSettings(config_path, overrides));
    return HeadTrainer(std::move(settings)).Run();
  });
}

}  // namespace speclab
