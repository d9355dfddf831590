#include "experiments/train_acceptance_head.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "algorithms/length_policies/common/acceptance_head.h"
#include "experiments/corpus_windows.h"
#include "experiments/head_training.h"
#include "experiments/draft_acceptance.h"
#include "experiments/model_loading.h"
#include "framework/core/file_util.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/model/llama_model.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {
namespace {

using acceptance_head::AcceptanceHead;
using acceptance_head::Features;

struct HeadSettings {
  Features features = Features::kLogProbs;
  int64_t hidden = 32;
  int64_t rollout = 0;  // drafts per window (0: teacher forcing)
  std::string target, drafter, output;
  double temperature = 1.0;
  double reject_weight = 1.0;  // SpecDec++'s class weight on rejections (AcceptanceLoss)
  CorpusData data;
  TrainingBasics run;
};

absl::StatusOr<HeadSettings> ParseHeadSettings(const std::string& path, const std::vector<std::string>& overrides) {
  ASSIGN_OR_RETURN(Options root, Options::FromFileWithOverrides(path, overrides));
  HeadSettings s;
  ASSIGN_OR_RETURN(Options head, root.GetMap("acceptance_head"));
  ASSIGN_OR_RETURN(std::string features, head.GetString("features", "log_probs"));
  auto parsed = acceptance_head::ParseFeatures(features);
  if (!parsed.ok()) return head.Error("features", std::string(parsed.status().message()));
  s.features = *parsed;
  ASSIGN_OR_RETURN(s.hidden, head.GetInt("hidden", s.hidden));
  if (s.hidden < 1 || s.hidden > 4096) return head.Error("hidden", "expected an integer in [1, 4096]");
  ASSIGN_OR_RETURN(std::string target, head.GetString("target"));
  ASSIGN_OR_RETURN(std::string drafter, head.GetString("drafter"));
  s.target = head.ResolvePath(target);
  s.drafter = head.ResolvePath(drafter);
  ASSIGN_OR_RETURN(s.temperature, head.GetDouble("temperature", s.temperature));
  if (!(s.temperature >= 0)) return head.Error("temperature", "expected a number >= 0");
  ASSIGN_OR_RETURN(s.rollout, head.GetInt("rollout", s.rollout));
  ASSIGN_OR_RETURN(s.reject_weight, head.GetDouble("reject_weight", s.reject_weight));
  if (!(s.reject_weight > 0 && s.reject_weight <= 1000))
    return head.Error("reject_weight", "expected a number in (0, 1000]");
  RETURN_IF_ERROR(head.CheckAllUsed());

  ASSIGN_OR_RETURN(s.data, ParseCorpusData(root, 2));
  if (s.rollout < 0 || s.rollout >= s.data.seq_len)
    return head.Error("rollout", absl::StrCat("expected an integer in [0, ", s.data.seq_len - 1,
                                              "] (drafts after a context of seq_len - rollout tokens)"));
  if (acceptance_head::ReadsIndex(s.features) && s.rollout == 0)
    return head.Error("rollout", absl::StrCat("the '", acceptance_head::FeaturesName(s.features),
                                              "' features read the draft's index, which teacher-forced windows do "
                                              "not have: set rollout >= 1"));
  ASSIGN_OR_RETURN(Options training, root.GetMap("training"));
  RETURN_IF_ERROR(ParseTrainingBasics(training, s.run));
  RETURN_IF_ERROR(training.CheckAllUsed());

  ASSIGN_OR_RETURN(std::string output, root.GetString("output"));
  s.output = root.ResolvePath(output);
  RETURN_IF_ERROR(root.CheckAllUsed());
  return s;
}

// Features [n, F] float32 and labels [n] of a batch of windows [b, seq_len].
struct Batch {
  at::Tensor features, labels;
};

class HeadTrainer {
 public:
  explicit HeadTrainer(HeadSettings s) : s_(std::move(s)) {}

  absl::Status Run() {
    ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(s_.data.tokenizer));
    ASSIGN_OR_RETURN(train_, CorpusTokens(*tokenizer, s_.data.train, s_.data.seq_len));
    ASSIGN_OR_RETURN(valid_, CorpusTokens(*tokenizer, s_.data.valid, s_.data.seq_len));
    ASSIGN_OR_RETURN(device_, ParseDevice(s_.run.device));
    ASSIGN_OR_RETURN(target_, LlamaModel::Load(s_.target, device_, at::kFloat, s_.data.seq_len));
    ASSIGN_OR_RETURN(drafter_, LlamaModel::Load(s_.drafter, device_, at::kFloat, s_.data.seq_len));
    train_ = train_.to(device_);
    valid_ = valid_.to(device_);
    const int64_t vocab = drafter_->config().vocab_size;
    if (target_->config().vocab_size != vocab)
      return absl::InvalidArgumentError(absl::StrCat("acceptance_head: the target ", s_.target, " has ",
                                                     target_->config().vocab_size, " tokens, the drafter ",
                                                     s_.drafter, " ", vocab));
    AcceptanceHead head = acceptance_head::NewHead(s_.features, vocab, s_.hidden, s_.run.seed, /*prior_logit=*/0.0,
                                                   drafter_->config().hidden_size);
    std::vector<at::Tensor> params = {head.w1.to(device_, at::kFloat), head.b1.to(device_, at::kFloat),
                                      head.w2.to(device_, at::kFloat), head.b2.to(device_, at::kFloat)};
    for (at::Tensor& p : params) p.requires_grad_(true);
    std::vector<at::Tensor> m, v;
    for (const at::Tensor& p : params) {
      m.push_back(at::zeros_like(p).detach());
      v.push_back(at::zeros_like(p).detach());
    }
    std::printf("acceptance head: %s features, hidden %lld, labels at T = %g, reject weight %g, on %s; %lld steps "
                "of %lld windows x %lld\n",
                acceptance_head::FeaturesName(s_.features), static_cast<long long>(s_.hidden), s_.temperature,
                s_.reject_weight,
                device_.str().c_str(),
                static_cast<long long>(s_.run.steps), static_cast<long long>(s_.run.batch_size),
                static_cast<long long>(s_.data.seq_len));
    if (s_.rollout > 0)
      std::printf("examples: the drafter's own %lld drafts after each window's first %lld tokens\n",
                  static_cast<long long>(s_.rollout), static_cast<long long>(s_.data.seq_len - s_.rollout));
    std::mt19937_64 rng(s_.run.seed);
    std::string log = "{\"steps\": [";
    for (int64_t step = 1; step <= s_.run.steps; ++step) {
      const Batch batch = MakeBatch(train_, s_.run.batch_size, rng);
      const at::Tensor predicted = acceptance_head::PredictFromFeatures(batch.features, params[0], params[1],
                                                                        params[2], params[3]);
      const at::Tensor loss = acceptance_head::AcceptanceLoss(predicted, batch.labels, s_.reject_weight);
      for (at::Tensor& p : params) p.mutable_grad() = at::Tensor();
      loss.backward();
      {
        c10::NoGradGuard no_grad;
        const double b1 = 0.9, b2 = 0.999;
        for (size_t i = 0; i < params.size(); ++i) {
          const at::Tensor g = params[i].grad();
          m[i].mul_(b1).add_(g, 1 - b1);
          v[i].mul_(b2).addcmul_(g, g, 1 - b2);
          const double correction = std::sqrt(1 - std::pow(b2, step)) / (1 - std::pow(b1, step));
          params[i].addcdiv_(m[i], v[i].sqrt().add_(1e-8), -s_.run.lr * correction);
        }
      }
      if (step % s_.run.log_every == 0 || step == s_.run.steps) {
        std::printf("step %5lld/%lld  loss %.4f\n", static_cast<long long>(step), static_cast<long long>(s_.run.steps),
                    loss.item<double>());
        std::fflush(stdout);
        absl::StrAppend(&log, step == s_.run.log_every ? "" : ", ",
                        absl::StrFormat("{\"step\": %d, \"loss\": %.6f}", step, loss.item<double>()));
      }
    }
    for (int i = 0; i < 4; ++i) params[i] = params[i].detach().to(at::kCPU, at::kDouble);
    head.w1 = params[0];
    head.b1 = params[1];
    head.w2 = params[2];
    head.b2 = params[3];
    const std::string held_out = Evaluate(head);
    absl::StrAppend(&log, "], \"held_out\": ", held_out, "}\n");
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(s_.output).parent_path(), ec);
    if (ec) return absl::InternalError(absl::StrCat(s_.output, ": cannot create its folder: ", ec.message()));
    RETURN_IF_ERROR(acceptance_head::SaveAcceptanceHead(s_.output, head));
    RETURN_IF_ERROR(WriteFileAtomically(s_.output + ".log.json", log));
    std::printf("wrote %s (and %s.log.json)\n", s_.output.c_str(), s_.output.c_str());
    return absl::OkStatus();
  }

 private:
  // Features and labels of `windows` random windows of `tokens`.
  Batch MakeBatch(const at::Tensor& tokens, int64_t windows, std::mt19937_64& rng) {
    c10::NoGradGuard no_grad;
    at::Tensor x = RandomWindows(tokens, windows, s_.data.seq_len, rng);
    const int64_t vocab = drafter_->config().vocab_size;
    at::Tensor q_logits, q_hidden, p_logits, depths;
    if (s_.rollout == 0) {
      std::tie(q_logits, q_hidden) = DrafterForward(x);
      q_logits = q_logits.reshape({-1, vocab});
      q_hidden = q_hidden.reshape({-1, q_hidden.size(-1)});
      p_logits = target_->ForwardTraining(x);  // no depths: no feature set without rollouts reads them
    } else {
      std::tie(x, q_logits, q_hidden) = DraftContinuations(x, rng);
      // The target's rows where the drafts were drawn: positions seq_len - rollout - 1 on.
      p_logits = target_->ForwardTraining(x).narrow(1, x.size(1) - s_.rollout - 1, s_.rollout);
      depths = at::arange(1, s_.rollout + 1, q_logits.options()).repeat({windows});
    }
    Batch batch;
    const at::Tensor rows = s_.features == Features::kHidden ? q_hidden : q_logits.log_softmax(-1);
    batch.features = acceptance_head::FeaturesOf(s_.features, rows, depths).to(at::kFloat);
    batch.labels = DraftAcceptance(p_logits.reshape({-1, vocab}).to(at::kFloat), q_logits, s_.temperature);
    return batch;
  }

  // The drafter's logits [b, T, vocab] float32 after each token of windows
  // [b, T], and the final hidden states [b, T, hidden] float32 they come from.
  std::pair<at::Tensor, at::Tensor> DrafterForward(const at::Tensor& x) {
    const at::Tensor hidden = drafter_->ForwardTrainingEmbedded(drafter_->Embed(x), 0);
    return {drafter_->LmHead(hidden), hidden.to(at::kFloat)};
  }

  // Windows [b, seq_len] whose last `rollout` tokens the drafter redrafts
  // from the rest, one token at a time, its logits [b * rollout, vocab] where
  // it drew them (window by window, draft by draft), and its hidden states
  // there [b * rollout, hidden].
  std::tuple<at::Tensor, at::Tensor, at::Tensor> DraftContinuations(at::Tensor x, std::mt19937_64& rng) {
    const int64_t context = x.size(1) - s_.rollout;
    at::Generator noise = at::detail::createCPUGenerator(rng());
    std::vector<at::Tensor> rows, states;
    for (int64_t i = 0; i < s_.rollout; ++i) {
      const auto [logits, hidden] = DrafterForward(x.narrow(1, 0, context + i));
      const at::Tensor q = logits.select(1, context + i - 1);
      states.push_back(hidden.select(1, context + i - 1).unsqueeze(1));
      at::Tensor token;
      if (s_.temperature == 0) {
        token = q.argmax(-1);
      } else {
        // The exponential race: argmax_v q_T(v) / E_v with E_v ~ Exp(1) draws from q_T.
        const at::Tensor e = -at::rand(q.sizes(), noise, q.options().device(at::kCPU)).log().to(q.device());
        token = ((q / s_.temperature).softmax(-1) / e).argmax(-1);
      }
      x = x.clone();
      x.select(1, context + i).copy_(token);
      rows.push_back(q.unsqueeze(1));
    }
    return {x, at::cat(rows, 1).reshape({-1, rows.front().size(2)}),
            at::cat(states, 1).reshape({-1, states.front().size(2)})};
  }

  // Held-out loss, mean label, mean prediction and Brier score, printed and as JSON.
  std::string Evaluate(const AcceptanceHead& head) {
    c10::NoGradGuard no_grad;
    std::mt19937_64 rng(s_.run.seed + 1);
    const Batch batch = MakeBatch(valid_, s_.run.eval_windows, rng);
    const at::Tensor predicted = acceptance_head::PredictFromFeatures(
        batch.features.to(at::kCPU, at::kDouble), head.w1, head.b1, head.w2, head.b2);
    const at::Tensor labels = batch.labels.to(at::kCPU, at::kDouble);
    const double loss = acceptance_head::AcceptanceLoss(predicted, labels, s_.reject_weight).item<double>();
    const double brier = (predicted - labels).pow(2).mean().item<double>();
    const double baseline = (labels - labels.mean()).pow(2).mean().item<double>();
    const double mean_label = labels.mean().item<double>(), mean_prediction = predicted.mean().item<double>();
    std::printf("held out (%lld positions): loss %.4f, Brier %.4f (a constant's %.4f), mean label %.3f, mean "
                "prediction %.3f\n",
                static_cast<long long>(labels.numel()), loss, brier, baseline, mean_label, mean_prediction);
    return absl::StrFormat(
        "{\"positions\": %d, \"loss\": %.6f, \"brier\": %.6f, \"constant_brier\": %.6f, \"mean_label\": %.6f, "
        "\"mean_prediction\": %.6f}",
        labels.numel(), loss, brier, baseline, mean_label, mean_prediction);
  }

  const HeadSettings s_;
  c10::Device device_ = c10::Device(c10::kCPU);
  at::Tensor train_, valid_;
  std::unique_ptr<LlamaModel> target_, drafter_;
};

}  // namespace

bool IsAcceptanceHeadConfig(const std::string& config_path) {
  return ConfigHasSection(config_path, {"acceptance_head"});
}

absl::Status RunAcceptanceHeadTraining(const std::string& config_path, const std::vector<std::string>& overrides) {
  return RunTrainingGuarded([&]() -> absl::Status {
    ASSIGN_OR_RETURN(HeadSettings settings, ParseHeadSettings(config_path, overrides));
    return HeadTrainer(std::move(settings)).Run();
  });
}

}  // namespace speclab
