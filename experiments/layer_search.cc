#include "experiments/layer_search.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstdio>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/corpus_text.h"
#include "experiments/draft_acceptance.h"
#include "experiments/model_loading.h"
#include "framework/core/file_util.h"
#include "framework/core/speculation_theory.h"
#include "framework/core/status_macros.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {

double LayerSetCost(const ModelConfig& c, int64_t kept_layers) {
  const double h = static_cast<double>(c.hidden_size), d = static_cast<double>(c.head_dim);
  const double attention = h * d * static_cast<double>(2 * c.num_attention_heads + 2 * c.num_key_value_heads);
  const double layer = attention + 3.0 * h * static_cast<double>(c.intermediate_size);
  const double head = h * static_cast<double>(c.vocab_size);
  return (static_cast<double>(kept_layers) * layer + head) / (static_cast<double>(c.num_hidden_layers) * layer + head);
}

namespace {

// target_logits [n, vocab] float64: the target's over the windows.
absl::StatusOr<LayerSetScore> Score(const LlamaModel& target, const at::Tensor& target_logits,
                                    const at::Tensor& windows, const std::vector<int>& layers,
                                    const LayerSearchOptions& options) {
  const int64_t vocab = target.config().vocab_size;
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> drafter, LlamaModel::ShareLayers(target, layers, /*kv_capacity=*/1));
  const at::Tensor logits = drafter->ForwardTraining(windows);
  if (!logits.defined()) return absl::InternalError("layer-search: the drafter's forward failed (see above)");
  LayerSetScore s{.layers = layers};
  s.acceptance = DraftAcceptance(target_logits, logits.reshape({-1, vocab}).to(at::kDouble),
                                 options.temperature)
                     .mean()
                     .item<double>();
  s.cost = LayerSetCost(target.config(), static_cast<int64_t>(layers.size()));
  s.gamma = theory::OptimalChainLength(s.acceptance, s.cost, options.max_gamma);
  s.speedup = s.gamma > 0 ? theory::ChainWalltimeImprovement(s.acceptance, s.gamma, s.cost) : 1.0;
  return s;
}

std::string ScoreYaml(const LayerSetScore& s) {
  return absl::StrFormat("{layers: [%s], acceptance: %.6f, cost: %.6f, gamma: %d, predicted_speedup: %.4f}",
                         absl::StrJoin(s.layers, ", "), s.acceptance, s.cost, s.gamma, s.speedup);
}

}  // namespace

absl::StatusOr<LayerSearchResult> SearchLayers(const LlamaModel& target, const at::Tensor& windows,
                                               const LayerSearchOptions& options) {
  c10::NoGradGuard no_grad;
  const int64_t total = target.config().num_hidden_layers, vocab = target.config().vocab_size;
  // The target's own logits, through a model of all its layers (the target
  // itself is const here).
  std::vector<int> layers;
  for (int i = 0; i < total; ++i) layers.push_back(i);
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> whole, LlamaModel::ShareLayers(target, layers, /*kv_capacity=*/1));
  const at::Tensor target_logits = whole->ForwardTraining(windows);
  if (!target_logits.defined()) return absl::InternalError("layer-search: the target's forward failed (see above)");
  const at::Tensor flat = target_logits.reshape({-1, vocab}).to(at::kDouble);  // once, for every candidate
  LayerSearchResult result;
  ASSIGN_OR_RETURN(LayerSetScore all, Score(target, flat, windows, layers, options));
  result.path.push_back(all);
  while (layers.size() > 1) {
    LayerSetScore round_best;
    round_best.acceptance = -1;
    for (size_t drop = 0; drop < layers.size(); ++drop) {
      std::vector<int> kept = layers;
      kept.erase(kept.begin() + static_cast<int64_t>(drop));
      ASSIGN_OR_RETURN(LayerSetScore s, Score(target, flat, windows, kept, options));
      if (s.acceptance > round_best.acceptance) round_best = s;  // ties: the earlier layer dropped
    }
    layers = round_best.layers;
    result.path.push_back(round_best);
  }
  result.best = result.path.front();
  for (const LayerSetScore& s : result.path)
    if (s.speedup > result.best.speedup) result.best = s;
  return result;
}

absl::StatusOr<LayerSearchFlags> ParseLayerSearchFlags(const std::vector<std::string>& args) {
  LayerSearchFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("layer-search: '", a, "' needs a value"));
    const std::string& v = args[++i];
    auto integer = [&](int64_t lo, int64_t hi, int64_t* out) -> absl::Status {
      if (!absl::SimpleAtoi(v, out) || *out < lo || *out > hi)
        return absl::InvalidArgumentError(
            absl::StrCat("layer-search: ", a, ": expected an integer in [", lo, ", ", hi, "], got '", v, "'"));
      return absl::OkStatus();
    };
    if (a == "--target") {
      f.target = v;
    } else if (a == "--text") {
      f.text = v;
    } else if (a == "--out") {
      f.out = v;
    } else if (a == "--device") {
      f.device = v;
    } else if (a == "--windows") {
      RETURN_IF_ERROR(integer(1, 4096, &f.windows));
    } else if (a == "--seq-len") {
      RETURN_IF_ERROR(integer(2, 1 << 16, &f.seq_len));
    } else if (a == "--max-gamma") {
      RETURN_IF_ERROR(integer(1, 64, &f.max_gamma));
    } else if (a == "--seed") {
      int64_t seed = 0;
      RETURN_IF_ERROR(integer(0, INT64_MAX, &seed));
      f.seed = static_cast<uint64_t>(seed);
    } else if (a == "--temperature") {
      if (!absl::SimpleAtod(v, &f.temperature) || !(f.temperature >= 0))
        return absl::InvalidArgumentError(absl::StrCat("layer-search: --temperature: expected a number >= 0, got '",
                                                       v, "'"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("layer-search: unexpected argument '", a, "'"));
    }
  }
  if (f.target.empty() || f.text.empty() || f.out.empty())
    return absl::InvalidArgumentError("layer-search needs --target DIR, --text FILE and --out FILE.yaml");
  return f;
}

absl::Status RunLayerSearch(const LayerSearchFlags& flags) {
  ASSIGN_OR_RETURN(c10::Device device, ParseDevice(flags.device));
  ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> target,
                   LlamaModel::Load(flags.target, device, at::kFloat, /*kv_capacity=*/1));
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(flags.target));
  ASSIGN_OR_RETURN(CorpusIds ids, TokenizeCorpusText(*tokenizer, flags.text));
  const int64_t n = static_cast<int64_t>(ids.ids.size());
  if (n <= flags.seq_len)
    return absl::InvalidArgumentError(
        absl::StrCat(flags.text, ": ", n, " tokens, fewer than one window of --seq-len ", flags.seq_len));
  std::mt19937_64 rng(flags.seed);
  std::uniform_int_distribution<int64_t> start(0, n - flags.seq_len);
  std::vector<int64_t> rows;
  for (int64_t w = 0; w < flags.windows; ++w) {
    const int64_t s = start(rng);
    rows.insert(rows.end(), ids.ids.begin() + s, ids.ids.begin() + s + flags.seq_len);
  }
  const at::Tensor windows = at::tensor(rows, at::kLong).reshape({flags.windows, flags.seq_len}).to(device);
  ASSIGN_OR_RETURN(LayerSearchResult result,
                   SearchLayers(*target, windows,
                                {.temperature = flags.temperature, .max_gamma = static_cast<int>(flags.max_gamma)}));
  const bool found = result.best.gamma > 0;
  std::string yaml = absl::StrCat("# speclab layer-search --target ", flags.target, " --text ", flags.text, " (",
                                  flags.windows, " windows of ", flags.seq_len, " tokens, T = ", flags.temperature,
                                  ")\n");
  if (found) {
    absl::StrAppend(&yaml, "# The kept layers of the best predicted chain speedup:\n",
                    "drafter: {type: layer_skip, layers: [", absl::StrJoin(result.best.layers, ", "), "]}\n",
                    "best: ", ScoreYaml(result.best), "\n");
  } else {
    absl::StrAppend(&yaml, "# No set of the target's layers is predicted to beat autoregressive decoding.\nbest: null\n");
  }
  absl::StrAppend(&yaml, "# Greedy backward elimination, one layer fewer a round:\nsearch:\n");
  std::printf("%-8s %-44s %10s %6s %6s %9s\n", "layers", "kept", "acceptance", "cost", "gamma", "speedup");
  for (const LayerSetScore& s : result.path) {
    absl::StrAppend(&yaml, "  - ", ScoreYaml(s), "\n");
    std::printf("%-8zu %-44s %10.4f %6.3f %6d %8.3fx\n", s.layers.size(), absl::StrJoin(s.layers, ",").c_str(),
                s.acceptance, s.cost, s.gamma, s.speedup);
  }
  RETURN_IF_ERROR(WriteFileAtomically(flags.out, yaml));
  if (found) {
    std::printf("best: layers [%s], predicted %.3fx at gamma %d; wrote %s\n",
                absl::StrJoin(result.best.layers, ", ").c_str(), result.best.speedup, result.best.gamma,
                flags.out.c_str());
  } else {
    std::printf("no set of the target's layers is predicted to beat autoregressive decoding; wrote %s\n",
                flags.out.c_str());
  }
  return absl::OkStatus();
}

}  // namespace speclab
